// swift-tools-version:6.0
// The example service (issue #35): the Downloader library inside a Hummingbird 2 app run by swift-service-lifecycle,
// speaking aria2's JSON-RPC. A package of its own, like Benchmarks/, so that the library stays free of dependencies.
import PackageDescription

let package = Package(
    name: "downloader-server",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "downloader-server", targets: ["DownloaderServer"])
    ],
    dependencies: [
        .package(name: "swift-downloader", path: "../.."),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.0.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.2.0"),
    ],
    targets: [
        // aria2's JSON-RPC over a DownloadManager: the methods, their parameters and aria2's field names, no HTTP.
        .target(
            name: "Aria2RPC",
            dependencies: [
                .product(name: "Downloader", package: "swift-downloader"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "DownloaderServer",
            dependencies: [
                "Aria2RPC",
                .product(name: "Downloader", package: "swift-downloader"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // aria2's methods without HTTP, the HTTP face through Hummingbird's test client (the host and origin guard,
        // the bearer check, /healthz, /metrics, /api/downloads under churn), and the WebSocket's notifications.
        .testTarget(
            name: "DownloaderServerTests",
            dependencies: [
                "DownloaderServer", "Aria2RPC",
                .product(name: "Downloader", package: "swift-downloader"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HummingbirdWSTesting", package: "hummingbird-websocket"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
