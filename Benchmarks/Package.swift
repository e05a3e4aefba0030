// swift-tools-version:6.0
// Benchmarks live in their own package so that the library stays free of dependencies; peers used only for
// comparison (AsyncHTTPClient) are added here.
import PackageDescription

let package = Package(
    name: "downloader-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "swift-downloader", path: ".."),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
    ],
    targets: [
        // Release-mode measurements of the library's hot paths (`md5 FILE`).
        .executableTarget(
            name: "downloader-bench",
            dependencies: [.product(name: "Downloader", package: "swift-downloader")]
        ),
        // The peer: AsyncHTTPClient's FileDownloadDelegate.
        .executableTarget(
            name: "ahc-download",
            dependencies: [.product(name: "AsyncHTTPClient", package: "async-http-client")]
        ),
        // The naive baseline: a URLSession data-task delegate that writes every chunk as it arrives.
        .executableTarget(name: "naive-download"),
        // A wide-area link made of loopback: each direction delayed by half the round trip, one shared rate cap.
        .executableTarget(name: "latency-proxy"),
        // The platform's floor: URLSession alone, discarding or hashing every chunk, never touching the disk.
        .executableTarget(
            name: "urlsession-floor",
            dependencies: [.product(name: "Downloader", package: "swift-downloader")]
        ),
        // What `dl -i LIST` does with the library, in a process that valgrind can run (instructions per small file).
        .executableTarget(
            name: "list-harness",
            dependencies: [.product(name: "Downloader", package: "swift-downloader")]
        ),
        // The platform's floor for many small requests: one URLSession, N data tasks at a time, bodies discarded
        // (the library only for its MD5, in the FLOOR_PRODUCT mode).
        .executableTarget(
            name: "urlsession-many",
            dependencies: [.product(name: "Downloader", package: "swift-downloader")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
