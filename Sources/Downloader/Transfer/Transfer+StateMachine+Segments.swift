import Foundation

/// A segmented fetch (`DownloadOptions.connections`) inside the transfer's one machine: after `.fetchSegments`, the
/// executor runs a request or a wait for the disk per connection, and answers each as it ends; the machine decides
/// which window every connection asks for next, which mirror it asks, and how the fetch ends.
extension Transfer.StateMachine {
    /// A segmented fetch under way.
    struct Segments: Sendable, Equatable {
        /// Which bytes each connection asks for next.
        fileprivate(set) var plan: SegmentPlan
        /// The URLs windows are spread over: the source in use, then the mirrors after it (`nil`: the URL itself).
        let sources: [URL?]
        /// Indexes in `sources` left out after a failure (never the first).
        fileprivate(set) var dropped: Set<Int> = []
        /// The source of each connection's window in flight.
        fileprivate(set) var sourceInFlight: [Int: Int] = [:]
        /// Connections with a request, or a wait for the disk, outstanding: each ends with one event.
        fileprivate(set) var busy: Set<Int> = []
        /// The first end that is not a success (`nil`: all well so far); no new window starts after it.
        fileprivate(set) var outcome: Transfer.SegmentsEnd?
        /// The version fetched: saved after every window, its validator sent as `If-Range` with each.
        let metadata: ResourceMetadata
    }

    /// What the executor does for one connection of a segmented fetch; the comment says which event answers it.
    enum SegmentAction: Sendable, Equatable {
        /// After the bandwidth limits, GET `range` from `target` (`nil`: the URL) on `connection`;
        /// `segmentEnded(connection:end:received:)`.
        case request(connection: Int, range: Range<Int64>, target: URL?, ifRange: String?)
        /// Save this checkpoint, then wait until the disk is past the middle of the connection's last window;
        /// `segmentDiskPassed(connection:failure:)`.
        case waitForDisk(connection: Int, checkpoint: ResourceMetadata)
        /// Tell the user.
        case warn(String)
        /// Cancel every request in flight (each still ends with its event).
        case cancelRequests
    }

    /// Starts the segmented fetch of the last `.fetchSegments`: a window for every connection.
    /// - Returns: what the connections do; when no connection is busy, `segmentsEnded()`.
    mutating func startSegments() -> [SegmentAction] {
        guard isFetchingSegments, segments == nil else { return [] }
        let metadata = position.metadata
        let missing = position.missing(total: metadata.totalLength ?? 0)
        let remaining = missing.reduce(0) { $0 + Int64($1.count) }
        let count = Int64(connections)
        // Windows per connection are smaller than one transfer's, so that the memory all connections hold stays near
        // it, and small enough that every connection gets one; under a bandwidth limit, as small as the limit's.
        var window = max(settings.windowSize / count, min(settings.windowSize, 4 << 20))
        window = min(window, max(64 << 10, (remaining + count - 1) / count))
        window = min(window, settings.limitedWindowSize ?? .max)
        // Connections take the next window in file order: bytes arrive nearly in order, so the digest follows the
        // watermark during the transfer (`SegmentPlan`).
        segments = Segments(
            plan: SegmentPlan(missing: missing, window: window), sources: segmentSources, metadata: metadata)
        return (0..<connections).compactMap { segments!.next(for: $0) }
    }

    /// A request of a segmented fetch ended.
    /// - Parameters:
    ///   - connection: the connection it ran on.
    ///   - end: how it ended.
    ///   - received: body bytes it delivered to the disk.
    /// - Returns: what the connections do next.
    mutating func segmentEnded(connection: Int, end: RequestEnd, received: Int64) -> [SegmentAction] {
        guard var run = segments, run.busy.remove(connection) != nil else { return [] }
        defer { segments = run }
        let source = run.sourceInFlight.removeValue(forKey: connection) ?? 0
        if source > 0, !end.isFinishedOrCancelled {
            // A mirror that fails, or proves another version, is left out; its window goes back to the plan.
            run.plan.failed(connection, received: received)
            run.dropped.insert(source)
            let warning = SegmentAction.warn(
                "mirror \(run.sources[source]?.redactedAbsoluteString ?? "") left out of the segments: \(end)")
            return [warning] + (run.next(for: connection).map { [$0] } ?? [])
        }
        let outcome: Transfer.SegmentsEnd
        switch end {
        case .finished:
            run.plan.finished(connection)
            run.busy.insert(connection)
            // Memory stays bounded per connection, as on one: the next window once the disk is past this one's
            // middle.
            return [.waitForDisk(connection: connection, checkpoint: run.metadata)]
        case .restartFromZero(let reason), .wholeWithoutRanges(let reason):
            outcome = .fallBack(reason: reason)
        case .unreliableETag(let reason):
            // Backends that disagree on ETags for the same bytes: what arrived stays (each byte came with the ETag the
            // file started with), the rest comes on one connection, judged without ETags.
            outcome = .continueAlone(reason: reason)
        case .unsatisfiable:
            let range = run.plan.inFlight[connection].map { "\($0.lowerBound)-\($0.upperBound - 1)" } ?? ""
            outcome = .fallBack(reason: "the server cannot serve bytes \(range)")
        case .failed(let error):
            outcome = .failed(error)
        case .diskBehind, .cutShort:  // only a whole-file or window response ends so; a segment is never one
            outcome = .failed(.invalidResponse(url, reason: "a segment was answered with a whole file"))
        case .cancelled:
            outcome = .cancelled
        }
        run.plan.failed(connection, received: received)
        return run.end(outcome)
    }

    /// The disk passed the middle of a connection's last window (after `.waitForDisk(connection:checkpoint:)`).
    /// - Parameters:
    ///   - connection: the connection that waited.
    ///   - failure: the disk's failure, if it failed.
    /// - Returns: what the connections do next.
    mutating func segmentDiskPassed(connection: Int, failure: DownloadError?) -> [SegmentAction] {
        guard var run = segments, run.busy.remove(connection) != nil else { return [] }
        defer { segments = run }
        if let failure { return run.end(.failed(failure)) }
        return run.next(for: connection).map { [$0] } ?? []
    }
}

extension Transfer.StateMachine.Segments {
    /// The window a connection asks for next, from the next source still in use; `nil` when nothing is left for it
    /// (or the fetch is ending).
    fileprivate mutating func next(for connection: Int) -> Transfer.StateMachine.SegmentAction? {
        guard outcome == nil, let range = plan.nextWindow(for: connection) else { return nil }
        let usable = sources.indices.filter { !dropped.contains($0) }
        let source = usable[connection % usable.count]
        sourceInFlight[connection] = source
        busy.insert(connection)
        return .request(
            connection: connection, range: range, target: sources[source], ifRange: metadata.validators.ifRange)
    }

    /// Records how the fetch ends, once: after a failure the other connections finish their windows (bytes in flight
    /// are not wasted) and the retry fetches only what is missing; a restart or a cancellation cancels them.
    fileprivate mutating func end(_ outcome: Transfer.SegmentsEnd) -> [Transfer.StateMachine.SegmentAction] {
        guard self.outcome == nil else { return [] }
        self.outcome = outcome
        plan.stop()
        // After a failure, or another ETag for the same bytes, the windows in flight finish (their bytes are good).
        switch outcome {
        case .failed, .continueAlone: return []
        default: break
        }
        return busy.isEmpty ? [] : [.cancelRequests]
    }
}

extension Transfer {
    /// How a segmented fetch ended.
    enum SegmentsEnd: Sendable, Equatable {
        /// Every missing byte arrived.
        case finished
        /// A response showed another version or ignored Range: restart the file on one connection.
        case fallBack(reason: String)
        /// A response came with another ETag for the same bytes (`RequestEnd.unreliableETag`): keep what arrived,
        /// fetch the rest on one connection without trusting ETags.
        case continueAlone(reason: String)
        case failed(DownloadError)
        case cancelled
    }
}

extension RequestEnd {
    /// Whether the request delivered what it asked for, or was closed from outside.
    var isFinishedOrCancelled: Bool {
        switch self {
        case .finished, .cancelled: true
        default: false
        }
    }
}

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
