/// Which bytes of a file each connection of a segmented download fetches next: a value whose `mutating` events
/// return what a connection does, tested without sockets.
///
/// The missing bytes are cut into windows taken in file order, so that bytes arrive nearly in order and the digest
/// keeps up with them (one long segment per connection, aria2's split, left three quarters of the file to hash after
/// its last byte). A window that fails goes back first, so no byte is ever asked for twice while it is in flight.
struct SegmentPlan: Sendable, Equatable {
    /// The parts nobody has asked for yet, in file order (empty ones are dropped).
    private(set) var unrequested: [Range<Int64>]
    /// The window each connection has in flight.
    private(set) var inFlight: [Int: Range<Int64>] = [:]
    /// The longest request.
    let window: Int64
    /// Whether the download is stopping: windows in flight end, no new one starts.
    private(set) var isStopping = false

    /// Plans the missing ranges.
    /// - Parameters:
    ///   - missing: the byte ranges still to fetch, sorted and disjoint.
    ///   - window: the longest request.
    init(missing: [Range<Int64>], window: Int64) {
        self.window = max(1, window)
        unrequested = missing.filter { !$0.isEmpty }
    }

    /// Whether every byte was asked for and every window has ended well.
    var isComplete: Bool { unrequested.isEmpty && inFlight.isEmpty }

    /// Bytes not asked for yet plus bytes in flight.
    var outstanding: Int64 {
        unrequested.reduce(0) { $0 + Int64($1.count) } + inFlight.values.reduce(0) { $0 + Int64($1.count) }
    }

    /// The next window for a connection that has none in flight, or `nil` when nothing is left for it (it may stop).
    mutating func nextWindow(for connection: Int) -> Range<Int64>? {
        precondition(inFlight[connection] == nil, "a connection asks for its next window after the last one ended")
        guard !isStopping, let first = unrequested.first else { return nil }
        let taken = first.lowerBound..<min(first.upperBound, first.lowerBound + window)
        if taken.upperBound == first.upperBound {
            unrequested.removeFirst()
        } else {
            unrequested[0] = taken.upperBound..<first.upperBound
        }
        inFlight[connection] = taken
        return taken
    }

    /// Lets the windows in flight end (their bytes are kept) and starts no other: a connection failed.
    mutating func stop() {
        isStopping = true
    }

    /// The connection's window arrived whole.
    mutating func finished(_ connection: Int) {
        inFlight[connection] = nil
    }

    /// The connection's window ended early after `received` bytes: the rest goes back, first in line.
    mutating func failed(_ connection: Int, received: Int64) {
        guard let window = inFlight.removeValue(forKey: connection) else { return }
        let rest = (window.lowerBound + max(0, min(received, Int64(window.count))))..<window.upperBound
        if !rest.isEmpty {
            let index = unrequested.firstIndex { $0.lowerBound >= rest.upperBound } ?? unrequested.endIndex
            unrequested.insert(rest, at: index)
        }
    }
}
