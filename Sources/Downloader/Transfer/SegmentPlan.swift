/// Which bytes of a file each connection of a segmented download fetches next: a value whose `mutating` events
/// return what a connection does, tested without sockets.
///
/// The missing bytes are split into segments: one per connection (at least `minimumSegment` bytes each), or, as a
/// transfer uses it, segments of one window taken in file order (`segmentSize`), so that bytes arrive nearly in order
/// and the digest keeps up with them. A connection asks for its segment one window at a time; one that runs out
/// takes the next unowned segment, else the second half of the largest part of another segment not yet asked for
/// (aria2's split rule), so fast connections help slow ones and no byte is ever asked for twice while it is in
/// flight. A window that fails goes back as an unowned segment.
struct SegmentPlan: Sendable, Equatable {
    /// A part of the file nobody has asked for yet: `next..<end`, reserved for `owner` when it has one.
    struct Segment: Sendable, Equatable {
        var next: Int64
        var end: Int64
        var owner: Int?
        var remaining: Int64 { end - next }
    }

    /// The parts not asked for yet (empty ones are dropped).
    private(set) var segments: [Segment]
    /// The window each connection has in flight.
    private(set) var inFlight: [Int: Range<Int64>] = [:]
    /// The longest request.
    let window: Int64
    /// The smallest part a steal leaves on either side.
    let minimumSegment: Int64
    /// Whether the download is stopping: windows in flight end, no new one starts.
    private(set) var isStopping = false

    /// Plans the missing ranges for `connections` connections.
    /// - Parameters:
    ///   - missing: the byte ranges still to fetch, sorted and disjoint.
    ///   - connections: how many connections fetch at once.
    ///   - window: the longest request.
    ///   - minimumSegment: the smallest segment (and the smallest part a steal leaves).
    ///   - segmentSize: cut the missing bytes into segments of this size, taken in file order, instead of one
    ///     segment per connection.
    init(
        missing: [Range<Int64>], connections: Int, window: Int64, minimumSegment: Int64, segmentSize: Int64? = nil
    ) {
        self.window = max(1, window)
        self.minimumSegment = max(1, minimumSegment)
        let total = missing.reduce(0) { $0 + Int64($1.count) }
        let size = max(self.minimumSegment, (total + Int64(max(1, connections)) - 1) / Int64(max(1, connections)))
        var segments: [Segment] = []
        for range in missing where !range.isEmpty {
            var start = range.lowerBound
            while start < range.upperBound {
                let end: Int64
                if let segmentSize {
                    end = min(range.upperBound, start + max(1, segmentSize))
                } else {
                    // A tail shorter than a segment joins the one before it.
                    end = range.upperBound - start < size + self.minimumSegment ? range.upperBound : start + size
                }
                segments.append(Segment(next: start, end: end, owner: nil))
                start = end
            }
        }
        self.segments = segments
    }

    /// Whether every byte was asked for and every window has ended well.
    var isComplete: Bool { segments.isEmpty && inFlight.isEmpty }

    /// Bytes not asked for yet plus bytes in flight.
    var outstanding: Int64 {
        segments.reduce(0) { $0 + $1.remaining } + inFlight.values.reduce(0) { $0 + Int64($1.count) }
    }

    /// The next window for a connection that has none in flight, or `nil` when nothing is left for it (it may stop).
    mutating func nextWindow(for connection: Int) -> Range<Int64>? {
        precondition(inFlight[connection] == nil, "a connection asks for its next window after the last one ended")
        guard !isStopping, let index = ownSegment(connection) ?? unownedSegment(connection) ?? steal(for: connection)
        else {
            return nil
        }
        let start = segments[index].next
        let end = min(segments[index].end, start + window)
        segments[index].next = end
        if segments[index].remaining == 0 { segments.remove(at: index) }
        inFlight[connection] = start..<end
        return start..<end
    }

    /// Lets the windows in flight end (their bytes are kept) and starts no other: a connection failed.
    mutating func stop() {
        isStopping = true
    }

    /// The connection's window arrived whole.
    mutating func finished(_ connection: Int) {
        inFlight[connection] = nil
    }

    /// The connection's window ended early after `received` bytes: the rest goes back, unowned, and the connection's
    /// own segment is released too (a failing connection should not hold work others could do).
    mutating func failed(_ connection: Int, received: Int64) {
        if let window = inFlight.removeValue(forKey: connection) {
            let rest = (window.lowerBound + max(0, min(received, Int64(window.count))))..<window.upperBound
            if !rest.isEmpty {
                let index = segments.firstIndex { $0.next >= rest.upperBound } ?? segments.endIndex
                segments.insert(Segment(next: rest.lowerBound, end: rest.upperBound, owner: nil), at: index)
            }
        }
        for index in segments.indices where segments[index].owner == connection { segments[index].owner = nil }
    }

    private func ownSegment(_ connection: Int) -> Int? {
        segments.firstIndex { $0.owner == connection }
    }

    private mutating func unownedSegment(_ connection: Int) -> Int? {
        guard let index = segments.firstIndex(where: { $0.owner == nil }) else { return nil }
        segments[index].owner = connection
        return index
    }

    /// Takes the second half of the largest owned part, when both halves keep at least `minimumSegment` bytes.
    private mutating func steal(for connection: Int) -> Int? {
        guard let index = segments.indices.max(by: { segments[$0].remaining < segments[$1].remaining }),
            segments[index].remaining >= 2 * minimumSegment
        else { return nil }
        let middle = segments[index].next + segments[index].remaining / 2
        let stolen = Segment(next: middle, end: segments[index].end, owner: connection)
        segments[index].end = middle
        segments.insert(stolen, at: index + 1)
        return index + 1
    }
}
