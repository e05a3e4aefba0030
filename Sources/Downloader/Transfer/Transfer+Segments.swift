import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Fetching the rest of a file over several connections at once (`DownloadOptions.connections`): a server that caps
/// each connection's speed at R then serves about N·R.
extension Transfer {
    /// How a segmented fetch ended.
    enum SegmentsOutcome: Sendable {
        /// Every missing byte arrived.
        case finished
        /// A response showed another version or ignored Range: restart the file on one connection.
        case fallBack(reason: String)
        case failed(DownloadError)
        case cancelled
    }

    /// The connections this transfer asks for: the download's own choice, else the engine's default, within 1...16.
    var requestedConnections: Int {
        min(Self.maximumConnections, max(1, options.connections ?? configuration.connections))
    }

    /// The most connections one download opens (aria2 has the same cap).
    static let maximumConnections = 16

    /// Fetches every missing byte over `connections` connections, each asking for its segment a window at a time.
    /// - Parameter sources: the URLs to spread the windows over (the URL, or the mirror in use, first; `nil` in the
    ///   list stands for the URL itself). A mirror that fails or shows another version is left out from then on.
    /// - Returns: how it ended; the position is whole when it finished.
    func fetchSegments(
        _ job: TransferJob, position: inout TransferPosition, connections: Int, sources: [URL?] = [nil]
    ) async -> SegmentsOutcome {
        let metadata = position.metadata
        let total = metadata.totalLength ?? 0
        let missing = position.missing(total: total)
        let remaining = missing.reduce(0) { $0 + Int64($1.count) }
        // Windows per connection are smaller than one transfer's, so that the memory all connections hold stays
        // near it, and small enough that every connection gets one; under a bandwidth limit, as small as the
        // limit's (see `BandwidthSchedule`).
        var window = max(configuration.windowSize / Int64(connections), min(configuration.windowSize, 4 << 20))
        window = min(window, max(64 << 10, (remaining + Int64(connections) - 1) / Int64(connections)))
        let windowSize = limiters.map(\.windowSize).reduce(window, min)
        // Connections take the next window in file order: bytes arrive nearly in order, so the digest follows the
        // watermark during the transfer. (One long segment per connection left three quarters of the file to hash
        // after its last byte: 1.26 × the time of one connection on an unthrottled loopback.)
        let plan = Locked(SegmentPlan(missing: missing, window: windowSize))
        let mirrors = SegmentSources(sources)
        let outcome = await withTaskGroup(of: SegmentsOutcome.self) { group -> SegmentsOutcome in
            for connection in 0..<connections {
                group.addTask {
                    await self.runConnection(connection, job: job, plan: plan, metadata: metadata, sources: mirrors)
                }
            }
            var first = SegmentsOutcome.finished
            for await outcome in group {
                guard case .finished = first else { continue }
                switch outcome {
                case .finished:
                    continue
                case .failed:
                    // The other connections finish their windows (bytes in flight are not wasted), then the run
                    // stops and its retry fetches only what is missing.
                    plan.withLock { $0.stop() }
                case .fallBack, .cancelled:
                    group.cancelAll()
                }
                first = outcome
            }
            return first
        }
        if case .finished = outcome {
            guard plan.withLock({ $0.isComplete }) else { return .failed(.cancelled(url)) }
            position.resume(at: total)
            position.written = nil
        }
        return outcome
    }

    /// One connection's loop: the next window of the plan, until none is left for it.
    private func runConnection(
        _ connection: Int, job: TransferJob, plan: Locked<SegmentPlan>, metadata: ResourceMetadata,
        sources: SegmentSources
    ) async -> SegmentsOutcome {
        while true {
            if Task.isCancelled { return .cancelled }
            guard let range = plan.withLock({ $0.nextWindow(for: connection) }) else { return .finished }
            for limiter in limiters {
                do {
                    try await limiter.wait(for: Int64(range.count))
                } catch {
                    return .cancelled
                }
            }
            let (source, target) = sources.source(for: connection)
            var request = makeRequest(to: target)
            request.setValue("bytes=\(range.lowerBound)-\(range.upperBound - 1)", forHTTPHeaderField: "Range")
            if let ifRange = metadata.validators.ifRange { request.setValue(ifRange, forHTTPHeaderField: "If-Range") }
            let sink = SegmentSink(job: job, range: range, known: metadata, windowSize: configuration.windowSize)
            let end = await bridge.perform(request, sink: sink)
            if source > 0, !end.isFinishedOrCancelled {
                // A mirror that fails, or proves another version, is left out; its window goes back to the plan.
                plan.withLock { $0.failed(connection, received: sink.received) }
                sources.drop(source)
                warn("mirror \(target?.redactedAbsoluteString ?? "") left out of the segments: \(end)")
                continue
            }
            switch end {
            case .finished:
                plan.withLock { $0.finished(connection) }
                job.send(.checkpoint(metadata))
                // Memory stays bounded per connection, as on one: the next window once the disk is past this one's
                // middle.
                await (sink.halfway ?? job.fence()).wait()
                if let failure = job.failure { return .failed(failure) }
            case .restartFromZero(let reason), .wholeWithoutRanges(let reason), .unreliableETag(let reason):
                return .fallBack(reason: reason)
            case .unsatisfiable:
                return .fallBack(reason: "the server cannot serve bytes \(range.lowerBound)-\(range.upperBound - 1)")
            case .failed(let error):
                plan.withLock { $0.failed(connection, received: sink.received) }
                return .failed(error)
            case .diskBehind, .cutShort:  // only a whole-file or window response ends so; a segment is never one
                plan.withLock { $0.failed(connection, received: sink.received) }
                return .failed(.invalidResponse(url, reason: "a segment was answered with a whole file"))
            case .cancelled:
                plan.withLock { $0.failed(connection, received: sink.received) }
                return .cancelled
            }
        }
    }
}

/// The URLs a segmented fetch spreads its windows over: the first always stays; a mirror that failed is dropped.
final class SegmentSources: Sendable {
    private let sources: [URL?]
    private let dropped = Locked(Set<Int>())

    init(_ sources: [URL?]) {
        self.sources = sources.isEmpty ? [nil] : sources
    }

    /// The source a connection's next window goes to: connections take turns over those still in use.
    /// - Returns: its index (0: the first) and its URL (`nil`: the download's URL itself).
    func source(for connection: Int) -> (index: Int, url: URL?) {
        let usable = dropped.withLock { dropped in sources.indices.filter { !dropped.contains($0) } }
        let index = usable[connection % usable.count]
        return (index, sources[index])
    }

    /// Leaves a mirror out from now on (never the first source).
    func drop(_ index: Int) {
        guard index > 0 else { return }
        dropped.withLock { _ = $0.insert(index) }
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
