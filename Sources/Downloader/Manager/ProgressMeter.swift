import Dispatch

/// Bytes on disk and the total, written from the delegate queue after every chunk and read by the manager's ticker:
/// progress reaches the actor at most every tick, never once per chunk.
final class ProgressBox: Sendable {
    private let counts = Locked<(written: Int64, total: Int64?)>((0, nil))

    func update(written: Int64, total: Int64?) {
        counts.withLock { $0 = (written, total) }
    }

    var current: (written: Int64, total: Int64?) { counts.withLock { $0 } }
}

/// Smoothed speed of one download in this session: only bytes that arrived count, not bytes resumed from disk.
struct SpeedMeter {
    private var lastBytes: Int64?
    private var lastTime: UInt64 = 0
    private(set) var bytesPerSecond: Double?

    /// Feeds the current byte count; returns the smoothed speed.
    mutating func sample(bytes: Int64, now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> Double? {
        defer {
            lastBytes = bytes
            lastTime = now
        }
        guard let lastBytes, now > lastTime else { return bytesPerSecond }
        let delta = bytes - lastBytes
        guard delta >= 0 else { return bytesPerSecond }  // restarted from 0: keep the old estimate
        let instant = Double(delta) / (Double(now - lastTime) / 1e9)
        bytesPerSecond = bytesPerSecond.map { 0.7 * $0 + 0.3 * instant } ?? instant
        return bytesPerSecond
    }
}
