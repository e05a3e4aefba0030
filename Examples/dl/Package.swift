// swift-tools-version:6.0
// `dl`, the wget-like command-line downloader (issue #14), on swift-argument-parser (issue #51): a package of its own,
// like Examples/Server and Examples/Fleet, so that the library and the root package stay free of dependencies.
import PackageDescription

let package = Package(
    name: "dl",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "dl", targets: ["dl"])
    ],
    dependencies: [
        .package(name: "swift-downloader", path: "../.."),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.0"),
    ],
    targets: [
        .executableTarget(
            name: "dl",
            dependencies: [
                .product(name: "Downloader", package: "swift-downloader"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Runs the built `dl` as a child process against the root package's test server; depending on `dl` makes
        // `swift test` build it.
        .testTarget(
            name: "dlTests",
            dependencies: [
                "dl",
                .product(name: "Downloader", package: "swift-downloader"),
                .product(name: "HTTPTestServer", package: "swift-downloader"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
