import Dispatch
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Takes one URL to one complete, verified file, surviving interruptions without ever producing a wrong byte.
///
/// The flow is one way: probe (HEAD, only when resuming) → restore the partial file and its saved hash → fetch the
/// rest in Range windows, one after another or over several connections (each validated, then written and hashed by
/// the pipeline's disk stages) → verify the digest → move into the completed area.
/// A run that stops early (error, cancellation) leaves the partial file and its saved state consistent, so the next
/// run resumes by Range. Scheduling, retries and persistence of receipts belong to the manager.
final class Transfer: Sendable {
    /// Settings of the engine.
    struct Configuration: Sendable, Equatable {
        /// Bytes of a full Range request at first, and whenever the disk falls behind: memory stays bounded because
        /// the next window starts only once the disk is past the middle of this one (at most one and a half windows
        /// wait in memory, also when windows grow).
        var windowSize: Int64 = 8 << 20
        /// The longest window: after a window the disk kept up with, the next is four times as long, up to this, so
        /// that a link with a long round trip idles between windows less often (see `WindowSizing`).
        var maximumWindowSize: Int64 = 128 << 20
        /// Bytes of a request that opens a new connection, except a run's first one while `firstRequestBudget` is
        /// set (that one asks for a whole window and is cut short if it would spin long).
        ///
        /// On Linux, FoundationNetworking keeps watching a new connection for writability for the whole of its first
        /// request (the connect step asks for it and nothing takes it back), and a socket is always writable: that
        /// request spins a core until it ends. A short first request ends the spin early; later requests reuse the
        /// connection without it (the documentation's platform notes).
        var firstWindowSize: Int64 = 16 << 10
        /// When a run's first request opens a new connection, it asks for a whole window and is cut short by this
        /// budget when its rest would take long (see `FirstRequestBudget`); `nil`: it asks for `firstWindowSize`.
        var firstRequestBudget: FirstRequestBudget? = FirstRequestBudget()
        /// How often a file changed mid-download may restart it before giving up.
        var maximumRestarts = 3
        /// Connections per download when its options do not say (`DownloadOptions.connections`).
        var connections = 1
        /// Several connections are used only when at least twice this many bytes are missing.
        var minimumSegmentSize: Int64 = 4 << 20
        /// The most received bytes that may wait for the disk while a whole file streams in one response (a server
        /// that ignores Range, or a body without a length); beyond it the response ends (see `RequestEnd.diskBehind`).
        var maximumUnwrittenBytes: Int64 = 16 << 20
        /// Whether a download of known length fails at once when the disk has less room than the bytes still to come
        /// (`DiskPipeline.checkFreeSpace`).
        var checksFreeSpace = true
        /// Whether the partial file's blocks are reserved once its length is known (`DiskPipeline.reserveSpace`).
        var fileAllocation = FileAllocation.none
        /// How long (nanoseconds) a body that cannot be resumed may keep more than `maximumUnwrittenBytes` waiting
        /// (see `WindowEndRule.behindGrace`).
        var diskBehindGrace: UInt64 = 5_000_000_000
        /// Written bytes the hash stage may hold in memory; beyond them it reads them back from the file.
        var hashBacklogLimit: Int64 = 1 << 20
        /// Whether the disk side copies every received chunk into its own blocks (a memory budget), rather than only
        /// while several transfers run (see `DiskPipeline.copiesChunks`).
        var copiesChunks = false
        /// Called where a partial file is picked up, before its file work (tests hold it there).
        var beforeRestore = Hook()
        /// Where a small fresh file's last steps run (`InlineFinishRule`): the process's rule, or a test's own.
        var finishes = InlineFinishes.shared

        /// The settings with every bound of what a transfer keeps in memory within `share` bytes (a manager's
        /// `memoryBudget` over its active downloads): windows (about 1.5 of them wait for the disk at most), the bytes
        /// of a whole body waiting to be written, the hash stage's backlog; and received chunks always copied into the
        /// disk side's blocks (`copiesChunks`), so that freed memory stays in few malloc arenas.
        /// - Parameter share: the transfer's bytes, at least 1 MiB.
        func fitting(memory share: Int64) -> Configuration {
            let share = max(1 << 20, share)
            var fitted = self
            let window = max(256 << 10, share * 2 / 3)
            fitted.windowSize = min(windowSize, window)
            fitted.maximumWindowSize = min(maximumWindowSize, window)
            fitted.firstWindowSize = min(firstWindowSize, fitted.windowSize)
            fitted.maximumUnwrittenBytes = min(maximumUnwrittenBytes, share / 2)
            fitted.hashBacklogLimit = min(hashBacklogLimit, share / 8)
            fitted.copiesChunks = true
            return fitted
        }
    }

    /// A test's hook in a configuration: `nil` in production, ignored by equality.
    struct Hook: Sendable, Equatable {
        var call: (@Sendable () -> Void)?

        static func == (lhs: Hook, rhs: Hook) -> Bool { true }
    }

    let url: URL
    /// `url.origin`, worked out once for every request's connection bookkeeping (issue #52).
    let origin: String
    let options: DownloadOptions
    let directory: DownloadDirectory
    let bridge: SessionBridge
    let configuration: Configuration
    /// A completed file that the verified file replaces (instead of taking a name of its own).
    let replacing: URL?
    /// Bandwidth limits this transfer keeps (its own, the manager's): each Range window waits for its turn.
    let limiters: [BandwidthLimiter]
    /// Told, as it happens, the bytes on disk, the requests in flight, where the verified file goes just before it
    /// moves, and what the transfer decided (`TransferObserver`).
    let observer: any TransferObserver
    /// The download's key, when the caller had it (else computed when the transfer runs).
    let partialKey: String?
    /// Its requests' rank at a host's connection gate (uptime nanoseconds; lower goes first), so that an older
    /// download's next window goes before a newer one's (`SessionBridge.perform`): when its run began, kept by every
    /// retry (`TransferRunner`), so a retried download does not go to the back of its host's queue.
    let rank: UInt64
    /// Whether a partial file or an earlier delivery is checked with a HEAD first; `false` after an answer that was not
    /// HTTP (`DownloadError.isNotHTTPAnswer`): a server that sends a body after a HEAD leaves it on the connection the
    /// next request reuses. Without it, the first GET's `If-Range` decides, as when a server refuses HEAD.
    let sendsHEAD: Bool

    /// Creates a transfer; nothing happens until `run()`.
    /// - Parameters:
    ///   - url: what to download.
    ///   - options: headers, expected MD5, naming.
    ///   - directory: where partial and completed files live.
    ///   - bridge: the manager's session.
    ///   - configuration: engine settings.
    ///   - replacing: a completed file the verified file replaces, if any.
    ///   - limiters: bandwidth limits to keep.
    ///   - rank: its requests' rank at a host's connection gate (by default, now).
    ///   - observer: told what happens, as it happens.
    ///   - partialKey: the download's key (`DownloadDirectory.key(for:)`), when the caller has it already.
    ///   - sendsHEAD: whether saved bytes or an earlier delivery are checked with a HEAD first (`sendsHEAD`).
    init(
        url: URL, options: DownloadOptions, directory: DownloadDirectory, bridge: SessionBridge,
        configuration: Configuration = Configuration(), replacing: URL? = nil, limiters: [BandwidthLimiter] = [],
        rank: UInt64 = DispatchTime.now().uptimeNanoseconds,
        observer: any TransferObserver, partialKey: String? = nil, sendsHEAD: Bool = true
    ) {
        self.rank = rank
        self.sendsHEAD = sendsHEAD
        self.partialKey = partialKey
        self.url = url
        self.origin = url.origin
        self.options = options
        self.directory = directory
        self.bridge = bridge
        self.configuration = configuration
        self.replacing = replacing
        self.limiters = limiters
        self.observer = observer
    }

    /// Tells the observer that bytes on disk could not be trusted and were not used.
    func warn(_ reason: String) {
        observer.transferSays(.warning(reason))
    }

    /// Tells the observer a decision worth a log line.
    func note(_ message: String) {
        observer.transferSays(.note(message))
    }

    /// Performs one request of this transfer through the bridge, counted while in flight.
    func perform(_ request: URLRequest, sink: any TransferSink) async -> RequestEnd {
        observer.transferRequestsChanged(by: 1)
        defer { observer.transferRequestsChanged(by: -1) }
        return await bridge.perform(request, sink: sink, rank: rank, origin: request.url == url ? origin : nil)
    }

    /// Downloads, verifies and moves the file into the completed area.
    /// - Returns: the completed file and its digest.
    /// - Throws: `DownloadError`; `.cancelled` when the calling task was cancelled (the partial file is kept).
    func run() async throws(DownloadError) -> TransferResult {
        try url.validateForDownload()
        let expected = try options.expectation()
        try directory.createAreas()
        let files = PartialFiles(folder: directory.state, url: url, key: partialKey)
        let hasState = files.hasState
        // A fresh download (no state, nothing where it would deliver) starts on the lean path: a small file that
        // arrives whole in its first response is finished without the disk pipeline (`Transfer+FreshFile.swift`);
        // anything else goes on here from where that request left it (issue #52).
        var carried: Carried?
        if let first = freshStart(hasState: hasState, expected: expected) {
            switch try await fetchFresh(first, files: files, expected: expected) {
            case .placed(let result): return result
            case .goOn(let state): carried = state
            }
        }
        return try await runGeneral(files: files, hasState: hasState, expected: expected, carried: carried)
    }

    /// The disk side of this transfer.
    func makePipeline(_ files: PartialFiles, expected: Checksum?) -> DiskPipeline {
        DiskPipeline(
            url: url, files: files, expectation: expected, hashesByDefault: options.computesChecksum,
            hashBacklogLimit: configuration.hashBacklogLimit, checksFreeSpace: configuration.checksFreeSpace,
            allocation: configuration.fileAllocation, copiesChunks: configuration.copiesChunks,
            progress: { [observer] written, total in observer.transferProgressed(written: written, total: total) })
    }

    /// The general path: probe, restore, windows or segments, verification and placement, as the machine decides.
    /// - Parameters:
    ///   - files: the download's partial files.
    ///   - hasState: whether they have a saved state.
    ///   - expected: the caller's checksum, if any.
    ///   - carried: where the lean path of a fresh download left it, if it ran.
    private func runGeneral(
        files: PartialFiles, hasState: Bool, expected: Checksum?, carried: Carried?
    ) async throws(DownloadError) -> TransferResult {
        let pipeline = carried?.pipeline ?? makePipeline(files, expected: expected)
        defer { pipeline.closeFile() }

        // A HEAD only when there is a partial file to resume (it tells whether the saved bytes are still the current
        // version before they are re-hashed), or a file this URL delivered earlier (it tells whether that file is
        // still current: then it is the answer). A fresh download learns the same from its first GET.
        var probed = hasState && sendsHEAD
        var probe: Probe?
        var source = 0
        if probed { (probe, source) = try await probeSources() }
        var ownFile: URL?
        // File work (hashing, syncing, moving) runs off the cooperative threads: see `Blocking`. A fresh download with
        // nothing where it would deliver starts without a hop; else it looks for an earlier delivery and, finding none,
        // prepares its partial file in the same hop (issue #52).
        let fresh = !hasState && replacing == nil
        var prepared = carried != nil ? TransferPosition() : fresh ? startFreshWithoutHop(pipeline) : nil
        if fresh, prepared == nil {
            switch try await Blocking.run({ () throws(DownloadError) in try self.prepareFresh(pipeline) }) {
            case .delivered(let recorded) where !sendsHEAD:
                ownFile = recorded.url  // not proved current without a HEAD: downloaded again, replaced once verified
            case .delivered(let recorded):
                let reused = try await reuse(recorded, expected: expected)
                if let result = reused.result { return result }
                (probe, probed, ownFile) = (reused.probe, true, recorded.url)
            case .restored(let position):
                prepared = position
            }
        }
        let found = probe
        let position: TransferPosition
        if let prepared {
            position = prepared
        } else {
            position = try await Blocking.run { () throws(DownloadError) in
                try self.restore(pipeline, probe: found, hasState: hasState)
            }
        }
        // A HEAD (whatever its answer) left a connection that later requests reuse (`Configuration.firstWindowSize`).
        var machine =
            carried?.machine
            ?? StateMachine(
                url: url, mirrors: mirrors, source: source, hasExpectation: expected != nil, settings: machineSettings,
                position: position, connections: requestedConnections, connectionPrimed: probed)
        var action = carried?.action ?? .proceed
        // Opens when the disk is past the middle of the last window (`nil`: once it has written everything).
        var halfway = carried?.halfway
        var computed = carried?.computed
        // A cancelled transfer (a suspend, a shutdown, a signal's stop) drops what only reached memory at once: its
        // writes would keep the stop waiting for a slow drive (issue #48).
        let outcome: Result<TransferResult, DownloadError> = await withTaskCancellationHandler {
            do throws(DownloadError) {
                while true {
                    switch action {
                    case .proceed:
                        let warm = bridge.hasWarmConnection(toOrigin: origin)
                        action = Task.isCancelled ? machine.cancel() : machine.next(warmConnection: warm)
                    case .warn(let reason):
                        warn(reason)
                        action = .proceed
                    case .startOver(let announced, let metadata, let reason):
                        warn(reason)
                        pipeline.send(.startOver(announced: announced))
                        pipeline.send(.checkpoint(metadata))
                        action = .proceed
                    case .request(let window):
                        (action, halfway) = try await send(window, pipeline: pipeline, machine: &machine)
                    case .fetchSegments:
                        action = await fetchSegments(pipeline, machine: &machine)
                        halfway = nil
                    case .waitForDisk(let checkpoint):
                        if let checkpoint { pipeline.send(.checkpoint(checkpoint)) }
                        if machine.isWholeAfterDisk && !Task.isCancelled {
                            let finished = try await finish(
                                pipeline, machine: machine, expected: expected, resumedBytes: position.offset,
                                replacing: replacing ?? ownFile)
                            switch finished {
                            case .placed(let result):
                                return .success(result)
                            case .goOn(let next, let nextAction, let digest):
                                (machine, action, computed) = (next, nextAction, digest)
                            }
                        } else {
                            // Memory stays bounded: the next request starts once the disk is past the middle of this
                            // window, so at most half a window waits while the next one arrives.
                            await (halfway ?? pipeline.fence()).wait()
                            action = machine.diskPassedMark(failure: pipeline.failure)
                        }
                    case .drainThenCheckpoint(let metadata):
                        let failure = await pipeline.drained()
                        if failure == nil { pipeline.send(.checkpoint(metadata)) }
                        action = machine.diskPassedMark(failure: failure)
                    case .verify:
                        let digest = try await verify(pipeline, metadata: machine.position.metadata, expected: expected)
                        computed = digest.computed
                        action = machine.digestChecked(mismatch: digest.mismatch)
                    case .place:
                        let (done, checksum, replaced) = (machine, computed, replacing ?? ownFile)
                        return .success(
                            try await Blocking.run { () throws(DownloadError) in
                                try self.place(
                                    pipeline, machine: done, checksum: checksum, expected: expected,
                                    resumedBytes: position.offset, replacing: replaced)
                            })
                    case .stop(let error):
                        try await stop(pipeline, machine.position, with: error)
                    case .discard(let error):
                        await pipeline.drained()
                        pipeline.discardFiles()
                        throw error
                    }
                }
            } catch {
                // The disk may still be writing the last window: let it finish before the file is closed.
                await pipeline.drained()
                return .failure(error)
            }
        } onCancel: {
            pipeline.discardUnwritten()
        }
        return try outcome.get()
    }
}

/// What a transfer's requests carry, and where they go.
extension Transfer {
    /// How many bytes before the resume point a request without a strong validator asks for again, to compare: a
    /// change that leaves these bytes equal would go unnoticed (the residual risk, in the Verification article).
    static let continuityCheckLength = 64 << 10

    /// Whether a window sent to the redirect target goes back to the original URL after `error`: 401, 403, 404 and
    /// 410 (an expired signed URL, an object moved on the CDN).
    static func sendsBackToOriginal(_ error: DownloadError) -> Bool {
        guard error == .httpStatus, let status = error.statusCode else { return false }
        return [401, 403, 404, 410].contains(status)
    }

    /// The download's mirrors that can be used: http or https URLs other than the URL itself, each once.
    var mirrors: [URL] {
        var seen: Set<URL> = [url]
        return options.mirrors.filter { mirror in
            (try? mirror.validateForDownload()) != nil && seen.insert(mirror).inserted
        }
    }

    /// What the user is told when a failed request sends the download on to a mirror.
    static func switchingMessage(after error: DownloadError, to mirror: URL) -> String {
        "\(error.localizedDescription); going on from mirror \(mirror.redactedAbsoluteString)"
    }

    /// A GET for the URL with the user's headers, `Accept-Encoding: identity` (a compressed body would break byte
    /// offsets), the manager's `User-Agent` unless those headers name one (`SessionBridge.prepare` adds it to any other
    /// request), and a range when given: the package's fields in one go (`setPackageFields`).
    /// - Parameters:
    ///   - target: where it goes (a mirror, a redirect's target); the download's URL by default.
    ///   - range: the `Range` field's value, if any.
    ///   - ifRange: the `If-Range` field's value, if any.
    /// - Returns: the request.
    func makeRequest(to target: URL? = nil, range: String? = nil, ifRange: String? = nil) -> URLRequest {
        var request = URLRequest(url: target ?? url)
        request.cachePolicy = .reloadIgnoringLocalCacheData
        // Credentials stay with their origin, as on a redirect (`RedirectChain.originBoundHeaders`).
        let sameOrigin = target.map { RedirectChain.isSameOrigin($0, url) } ?? true
        for (name, value) in options.headers
        where sameOrigin
            || !RedirectChain.originBoundHeaders.contains(where: { $0.caseInsensitiveCompare(name) == .orderedSame })
        {
            request.setValue(value, forHTTPHeaderField: name)
        }
        var fields: [(name: String, value: String)] = [("Accept-Encoding", "identity")]
        if let userAgent = bridge.configuration.userAgent,
            !options.headers.keys.contains(where: { URLRequest.equalIgnoringASCIICase($0, "User-Agent") })
        {
            fields.append(("User-Agent", userAgent))
        }
        if let range { fields.append(("Range", range)) }
        if let ifRange { fields.append(("If-Range", ifRange)) }
        request.setPackageFields(fields)
        #if !canImport(FoundationNetworking)
            Self.moveUserInfoToAuthorization(&request)
        #endif
        return request
    }

    /// Moves a URL's user and password into an `Authorization: Basic` header, and out of the URL. Apple's URLSession
    /// sends URL credentials only in answer to a `401` (curl, and so Linux's URLSession, send them with the first
    /// request); with the header, both send them at once. The header is origin-bound: a redirect to another origin
    /// drops it (`RedirectChain.originBoundHeaders`). A request with an `Authorization` of its own keeps it.
    static func moveUserInfoToAuthorization(_ request: inout URLRequest) {
        // URLComponents decodes both (URL.password stays percent-encoded on Linux).
        guard let url = request.url, url.hasCredentials,
            let components = URLComponents(url: url, resolvingAgainstBaseURL: false), let user = components.user,
            !user.isEmpty
        else { return }
        if request.value(forHTTPHeaderField: "Authorization") == nil {
            let credential = DownloadCredential(user: user, password: components.password ?? "")
            request.setValue(credential.basicAuthorization, forHTTPHeaderField: "Authorization")
        }
        request.url = url.withoutCredentials
    }
}

/// The executor's steps for `StateMachine` actions that touch the network or the disk: a window's request and an early
/// end (the check of the whole file and its move into the completed area: `Transfer+Finish.swift`).
extension Transfer {
    /// Sends one window's GET and tells the machine how it ended.
    /// - Returns: the machine's next action, and the fence that opens when the disk is past the window's middle.
    func send(
        _ window: StateMachine.Window, pipeline: DiskPipeline, machine: inout StateMachine
    ) async throws(DownloadError) -> (StateMachine.Action, DiskFence?) {
        let request = makeRequest(for: window)
        let overlap =
            window.overlap > 0 ? try await lastBytes(pipeline, machine.position, count: window.overlap) : Data()
        guard await waitForTurn(window) else { return (machine.cancel(), nil) }
        let sink = makeWindowSink(window, pipeline: pipeline, position: machine.position, overlap: overlap)
        let end = await perform(request, sink: sink)
        return (windowEnded(end, sink: sink, machine: &machine), sink.halfway)
    }

    /// The machine's settings: the engine's, its windows within the bandwidth limits.
    var machineSettings: StateMachine.Settings {
        StateMachine.Settings(configuration, limitedWindowSize: limiters.compactMap(\.windowSize).min())
    }

    /// Waits for a window's turn under the bandwidth limits (`BandwidthSchedule`); a window without an end waits not.
    /// - Returns: `false` when the wait was cancelled.
    func waitForTurn(_ window: StateMachine.Window) async -> Bool {
        guard let end = window.end else { return true }
        for limiter in limiters {
            do {
                try await limiter.wait(for: end - window.requestStart + 1)
            } catch {
                return false
            }
        }
        return true
    }

    /// The request of one window.
    func makeRequest(for window: StateMachine.Window) -> URLRequest {
        makeRequest(
            to: window.target, range: window.end.map { "bytes=\(window.requestStart)-\($0)" },
            ifRange: window.end == nil ? nil : window.ifRange)
    }

    /// The sink of one window's GET.
    func makeWindowSink(
        _ window: StateMachine.Window, pipeline: DiskPipeline, position: TransferPosition, overlap: Data = Data()
    ) -> WindowSink {
        WindowSink(
            pipeline: pipeline, position: position, start: window.requestStart, end: window.end,
            ranged: window.end != nil, overlap: overlap, checkpointInterval: configuration.windowSize,
            maximumUnwritten: configuration.maximumUnwrittenBytes, behindGrace: configuration.diskBehindGrace,
            grownWindowLimit: window.unwrittenLimit,
            sameVersionOnly: window.sameVersionOnly,
            firstRequestBudget: window.cutWhenSlow ? configuration.firstRequestBudget : nil)
    }

    /// Tells the machine how a window's request ended, and the user what it decided on the way.
    /// - Returns: the machine's next action.
    func windowEnded(_ end: RequestEnd, sink: WindowSink, machine: inout StateMachine) -> StateMachine.Action {
        if case .diskBehind = end {
            note(
                "the disk fell behind the network: the response ended early (what arrived is kept); the rest comes "
                    + "in windows")
        }
        if sink.isOtherVersion {
            warn("the server sent another version of the file in place of the rest; it replaces it from byte 0")
        }
        // The request has ended: the network side is the machine's again.
        let report = StateMachine.Report(
            position: sink.position, respondingURL: sink.respondingURL, isWholeStream: sink.isWholeStream,
            isOtherVersion: sink.isOtherVersion, received: sink.received, peakUnwritten: sink.peakUnwritten,
            hashFellBehind: sink.hashFellBehind)
        return machine.requestEnded(end, report: report)
    }

    /// Ends the transfer early: lets the disk finish, saves a consistent state for the next run (or, when no byte
    /// arrived — a 404, a refused connection — leaves nothing behind) and throws. Bytes of a server that ignores
    /// Range are worth nothing to a later request (it streams the file from byte 0 again): they are given up at once,
    /// neither written to the end, hashed nor synced (`DiskPipeline.abandon`).
    func stop(
        _ pipeline: DiskPipeline, _ position: TransferPosition, with error: DownloadError
    ) async throws(DownloadError) -> Never {
        if !position.metadata.rangesSupported {
            await pipeline.abandon(position.metadata)
            throw error
        }
        let diskFailure = await pipeline.drained()
        let metadata = position.metadata
        await Blocking.run {
            if pipeline.offset == 0 {
                pipeline.discardFiles()
            } else {
                if diskFailure != nil { pipeline.catchUpAfterFailure() }
                try? pipeline.checkpoint(metadata, segments: pipeline.segmentsToSave)
            }
        }
        throw diskFailure ?? error
    }
}

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
        let request = makeRequest(
            to: target, range: "bytes=\(range.lowerBound)-\(range.upperBound - 1)", ifRange: ifRange)
        let sink = SegmentSink(pipeline: pipeline, range: range, known: known, windowSize: configuration.windowSize)
        let end = await perform(request, sink: sink)
        return .ended(connection: connection, end: end, received: sink.received, halfway: sink.halfway)
    }
}
