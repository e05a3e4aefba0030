import Foundation

/// The waiting queue: which downloads wait for a slot, and which one starts next.
struct Scheduler {
    let prioritization: DownloadPrioritization
    private(set) var waiting: [URL] = []

    init(prioritization: DownloadPrioritization) {
        self.prioritization = prioritization
    }

    /// Adds a download at the back of the queue (a second add of the same URL does nothing).
    mutating func enqueue(_ url: URL) {
        if !waiting.contains(url) { waiting.append(url) }
    }

    /// Removes a download from the queue, if it is there.
    mutating func remove(_ url: URL) {
        waiting.removeAll { $0 == url }
    }

    /// Takes the next download to start: the oldest (FIFO) or the newest (LIFO).
    mutating func next() -> URL? {
        guard !waiting.isEmpty else { return nil }
        switch prioritization {
        case .fifo: return waiting.removeFirst()
        case .lifo: return waiting.removeLast()
        }
    }

    func contains(_ url: URL) -> Bool { waiting.contains(url) }
}
