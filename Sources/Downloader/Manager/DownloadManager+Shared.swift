import Foundation

extension DownloadManager {
    /// The shared manager, keeping its files in the user's cache directory (`$XDG_CACHE_HOME` or `~/.cache` on
    /// Linux, `~/Library/Caches` on macOS) under `Downloader`.
    public static let shared: DownloadManager = {
        let configuration = Configuration(directory: defaultDirectory)
        // If the directory cannot be opened now (not creatable, or owned by another process), each download reports
        // that error itself.
        do {
            return try DownloadManager(configuration: configuration)
        } catch {
            let reason = (error as? DownloadError) ?? .fileSystem(nil, reason: "\(error)")
            return DownloadManager(unusable: configuration, error: reason)
        }
    }()

    /// `<cache directory>/Downloader`.
    public static var defaultDirectory: URL {
        let environment = ProcessInfo.processInfo.environment
        #if os(Linux)
            if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") {
                return URL(fileURLWithPath: xdg, isDirectory: true).appendingPathComponent(
                    "Downloader", isDirectory: true)
            }
        #endif
        let caches =
            FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first
            ?? URL(fileURLWithPath: NSHomeDirectory(), isDirectory: true).appendingPathComponent(".cache")
        return caches.appendingPathComponent("Downloader", isDirectory: true)
    }
}
