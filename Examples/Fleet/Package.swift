// swift-tools-version:6.0
// Many workers, one list (issue #49): `downloader-fleet` spreads a list of URLs over workers on any number of machines
// through PostgreSQL — shards claimed with `SELECT … FOR UPDATE SKIP LOCKED` under a lease, results committed only
// while the lease holds. A package of its own, like Examples/Server: the library stays free of dependencies.
import PackageDescription

let package = Package(
    name: "downloader-fleet",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "downloader-fleet", targets: ["DownloaderFleet"])
    ],
    dependencies: [
        .package(name: "swift-downloader", path: "../.."),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    ],
    targets: [
        // The rules as values, without a database: shards, leases and their fencing tokens, result lines.
        .target(
            name: "FleetCore",
            dependencies: [.product(name: "Downloader", package: "swift-downloader")]
        ),
        .executableTarget(
            name: "DownloaderFleet",
            dependencies: [
                "FleetCore",
                .product(name: "Downloader", package: "swift-downloader"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(name: "FleetCoreTests", dependencies: ["FleetCore"]),
    ],
    swiftLanguageModes: [.v6]
)
