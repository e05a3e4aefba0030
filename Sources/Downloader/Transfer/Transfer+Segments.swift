import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Fetching the rest of a file over several connections at once (`DownloadOptions.connections`): a server that caps
/// each connection's speed at R then serves about N·R.
extension Transfer {
    /// The connections this transfer asks for: the download's own choice, else the engine's default, within 1...16.
    var requestedConnections: Int {
        min(Self.maximumConnections, max(1, options.connections ?? configuration.connections))
    }

    /// The most connections one download opens (aria2 has the same cap).
    static let maximumConnections = 16

    /// What ended for one connection of a segmented fetch.
    private enum SegmentEvent: Sendable {
        /// Its request ended; the fence opens when the disk is past the window's middle.
        case ended(connection: Int, end: RequestEnd, received: Int64, halfway: DiskFence?)
        /// It waited for the disk.
        case diskPassed(connection: Int)
    }

    /// Carries out a segmented fetch (`.fetchSegments`): each connection's request or wait for the disk is a child
    /// task doing I/O only; every decision is the machine's, taken here, one event at a time.
    /// - Returns: the machine's next action once every connection is idle.
    func fetchSegments(_ pipeline: DiskPipeline, machine: inout StateMachine) async -> StateMachine.Action {
        // The state says "segments" before any is written (`DiskPipeline.beginSegments`); a disk failure here fails
        // the writes that follow, and with them the fetch.
        if await pipeline.drained() == nil, !pipeline.segmented {
            do throws(DownloadError) {
                try pipeline.beginSegments(machine.position.metadata)
            } catch {
                pipeline.fail(error)
            }
        }
        await withTaskGroup(of: SegmentEvent.self) { group in
            var halfway: [Int: DiskFence] = [:]
            let known = machine.position.metadata
            var actions = machine.startSegments()
            while true {
                for action in actions {
                    switch action {
                    case .request(let connection, let range, let target, let ifRange):
                        group.addTask {
                            await self.requestSegment(
                                range, on: connection, from: target, ifRange: ifRange, pipeline: pipeline, known: known)
                        }
                    case .waitForDisk(let connection, let checkpoint):
                        pipeline.send(.checkpoint(checkpoint))
                        let fence = halfway.removeValue(forKey: connection) ?? pipeline.fence()
                        group.addTask {
                            await fence.wait()
                            return .diskPassed(connection: connection)
                        }
                    case .warn(let reason):
                        warn(reason)
                    case .cancelRequests:
                        group.cancelAll()
                    }
                }
                guard let event = await group.next() else { break }
                switch event {
                case .ended(let connection, let end, let received, let fence):
                    halfway[connection] = fence
                    actions = machine.segmentEnded(connection: connection, end: end, received: received)
                case .diskPassed(let connection):
                    actions = machine.segmentDiskPassed(connection: connection, failure: pipeline.failure)
                }
            }
        }
        return machine.segmentsEnded()
    }

    /// One window's GET of a segmented fetch, after the bandwidth limits.
    private func requestSegment(
        _ range: Range<Int64>, on connection: Int, from target: URL?, ifRange: String?, pipeline: DiskPipeline,
        known: ResourceMetadata
    ) async -> SegmentEvent {
        for limiter in limiters {
            do {
                try await limiter.wait(for: Int64(range.count))
            } catch {
                return .ended(connection: connection, end: .cancelled, received: 0, halfway: nil)
            }
        }
        if Task.isCancelled { return .ended(connection: connection, end: .cancelled, received: 0, halfway: nil) }
        var request = makeRequest(to: target)
        request.setValue("bytes=\(range.lowerBound)-\(range.upperBound - 1)", forHTTPHeaderField: "Range")
        if let ifRange { request.setValue(ifRange, forHTTPHeaderField: "If-Range") }
        let sink = SegmentSink(pipeline: pipeline, range: range, known: known, windowSize: configuration.windowSize)
        let end = await perform(request, sink: sink)
        return .ended(connection: connection, end: end, received: sink.received, halfway: sink.halfway)
    }
}
