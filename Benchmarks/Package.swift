// swift-tools-version:6.0
// Benchmarks live in their own package so that the library stays free of dependencies;
// peers used only for comparison are added here.
import PackageDescription

let package = Package(
    name: "downloader-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "swift-downloader", path: "..")
    ],
    targets: [
        .executableTarget(
            name: "downloader-bench",
            dependencies: [.product(name: "Downloader", package: "swift-downloader")]
        )
    ],
    swiftLanguageModes: [.v6]
)
