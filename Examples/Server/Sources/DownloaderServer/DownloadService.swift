import Downloader
import ServiceLifecycle

/// The manager as a `Service`: it runs until the service group shuts down gracefully (SIGTERM, SIGINT,
/// `aria2.shutdown`), then suspends every download and saves the state, so that the next start continues them
/// (`Configuration.continuesInterruptedDownloads`).
struct DownloadService: Service {
    let manager: DownloadManager

    func run() async throws {
        // Returns at a graceful shutdown; throws when the group is cancelled: stop the manager either way.
        try? await gracefulShutdown()
        await manager.shutdown()
    }
}
