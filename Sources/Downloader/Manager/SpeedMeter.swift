import Dispatch

/// The speed of one download in this session, averaged over the last few seconds of real time: a tick in which
/// nothing arrived counts as a slow tick, so a server that sends bursts and pauses shows its true average, and a body
/// that trickles shows a trickle. Only bytes that arrived count, not bytes resumed from disk.
struct SpeedMeter {
    /// The span the average covers, in nanoseconds.
    static let span: UInt64 = 5_000_000_000
    /// The shortest history that gives a speed at all.
    static let minimumSpan: UInt64 = 500_000_000

    private var samples: [(time: UInt64, bytes: Int64)] = []

    /// Feeds the current byte count.
    /// - Parameters:
    ///   - bytes: bytes on disk now.
    ///   - now: the time in nanoseconds.
    /// - Returns: bytes per second over the last `span` (less at the start), or `nil` before `minimumSpan`.
    mutating func sample(bytes: Int64, now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> Double? {
        if let last = samples.last, bytes < last.bytes || now < last.time { samples.removeAll() }  // restarted
        samples.append((now, bytes))
        while samples.count > 2, now - samples[1].time >= Self.span { samples.removeFirst() }
        guard let first = samples.first, now - first.time >= Self.minimumSpan else { return nil }
        return Double(bytes - first.bytes) / (Double(now - first.time) / 1e9)
    }
}
