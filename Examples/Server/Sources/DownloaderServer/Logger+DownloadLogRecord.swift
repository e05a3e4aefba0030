import Downloader
import Logging

extension Logger {
    /// Logs what a manager decides (`Configuration.log`): its level names are swift-log's.
    func log(_ record: DownloadLogRecord) {
        log(
            level: Logger.Level(rawValue: record.level.rawValue) ?? .info, "\(record.message)",
            metadata: record.metadata.mapValues { .string($0) })
    }
}
