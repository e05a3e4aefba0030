/// The order in which waiting downloads start.
public enum DownloadPrioritization: Sendable, Hashable {
    /// First queued, first started.
    case fifo
    /// Last queued, first started.
    case lifo
}
