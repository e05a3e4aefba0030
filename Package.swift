// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "swift-downloader",
    platforms: [.macOS(.v13), .iOS(.v16)],
    products: [
        .library(name: "Downloader", targets: ["Downloader"]),
        // The in-process test server, for the tests of the example packages (Examples/dl); not for applications.
        .library(name: "HTTPTestServer", targets: ["HTTPTestServer"]),
        .executable(name: "downloader-demo", targets: ["downloader-demo"]),
    ],
    targets: [
        .target(name: "Downloader"),
        .target(
            name: "HTTPTestServer",
            dependencies: ["Downloader"],
            path: "Tests/HTTPTestServer",
            exclude: ["README.md"]
        ),
        // The test server as a process of its own, for the reliability scripts.
        .executableTarget(name: "http-test-server", dependencies: ["HTTPTestServer"], path: "Tests/HTTPTestServerTool"),
        .executableTarget(
            name: "downloader-demo",
            dependencies: ["Downloader", "HTTPTestServer"],
            path: "Examples/Demo"
        ),
        // README.md's Swift snippets, compiled; SnippetsTests runs them and checks the README says the same.
        .target(name: "Snippets", dependencies: ["Downloader"], path: "Examples/Snippets"),
        .testTarget(name: "SnippetsTests", dependencies: ["Snippets", "Downloader", "HTTPTestServer"]),
        // A manager in a child process, which the model-based test kills with SIGKILL.
        .executableTarget(name: "downloader-model-child", dependencies: ["Downloader"], path: "Tests/ModelChild"),
        .testTarget(
            name: "DownloaderTests", dependencies: ["Downloader", "HTTPTestServer", "downloader-model-child"]),
        .testTarget(name: "HTTPTestServerTests", dependencies: ["HTTPTestServer", "Downloader"]),
        // The library as a dependent sees it: no `@testable import` (issue #51).
        .testTarget(name: "DownloaderAPITests", dependencies: ["Downloader", "HTTPTestServer"]),
        // Runs the built `downloader-demo` as a child process; depending on it makes `swift test` build it. (`dl`
        // and its tests are a package of their own: Examples/dl.)
        .testTarget(name: "DemoTests", dependencies: ["downloader-demo", "HTTPTestServer"]),
    ],
    swiftLanguageModes: [.v6]
)
