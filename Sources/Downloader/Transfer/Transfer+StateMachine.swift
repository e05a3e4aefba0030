import Foundation

extension Transfer {
    /// Every decision of one transfer, from its restored partial file to the verified file, as a value: events change
    /// it only through `mutating` methods, each returning the one `Action` the executor (`Transfer.run()`) carries out
    /// and then answers with the next event. It touches no socket, file or clock, so each rule is tested alone and by
    /// seeded random event sequences (`TransferStateMachineTests`).
    ///
    /// The executor owns the I/O: requests (`WindowSink`, `fetchSegments`), the disk stages (`DiskPipeline`), bandwidth
    /// limits. The machine owns what the responses taught: the position (which moves into a request's sink and comes
    /// back with its end), the window sizes, where the URL redirected to, the restarts, the connection count.
    struct StateMachine: Sendable {
        private enum State: Sendable, Equatable {
            case ready
            case requesting(Window)
            case segments
            case waitingForDisk(endsAfter: Bool)
            case verifying
            case placing
            case stopped
        }

        /// The download's URL (its identity) and then its mirrors (`DownloadOptions.mirrors`).
        let sources: [URL]
        var url: URL { sources[0] }
        let settings: Settings
        /// Whether the caller expects a checksum, which lets a mirror with other validators continue the file.
        let hasExpectation: Bool
        /// Which of `sources` requests go to: the next one after a request fails.
        private(set) var source = 0
        /// The network side; a request's sink holds a copy while it runs and hands it back in its `Report`.
        private(set) var position: TransferPosition
        private(set) var sizing: WindowSizing
        /// Restarts of the file from byte 0 so far, never more than the limit (a changed version; a checksum mismatch is
        /// counted apart).
        private(set) var restarts = 0
        /// Connections for the rest of the download.
        private(set) var connections: Int
        /// Where the URL led in this run: later windows go there (one round trip each, not two); every restart and a
        /// refusal there (`Transfer.sendsBackToOriginal`) ask the URL itself again.
        private(set) var redirectTarget: URL?
        /// The most received bytes that waited to be written at once during any window of this run.
        private(set) var peakUnwritten: Int64 = 0
        /// Whether a request of this run opened a connection already (only the first one is short).
        private var connectionPrimed: Bool
        /// Whether this run sent a request: only its first may open a connection with a whole window
        /// (`Window.cutWhenSlow`).
        private var sentRequest = false
        private var state = State.ready
        /// The segmented fetch under way after `.fetchSegments` (changed only by its events,
        /// `Transfer+StateMachine+Segments.swift`).
        var segments: Segments?

        /// Whether the machine ended (stopped, failed or handed over the verified file); no event requests anything
        /// after that.
        var isFinished: Bool { state == .stopped || state == .placing }

        /// A machine for a partial file restored at `position`.
        /// - Parameters:
        ///   - url: the download's URL (named by its errors).
        ///   - mirrors: other URLs of the same file.
        ///   - source: which of the URL and its mirrors requests go to first (where a resume's HEAD was answered).
        ///   - hasExpectation: whether the caller expects a checksum.
        ///   - settings: window sizes and limits.
        ///   - position: the restored partial file's network side.
        ///   - connections: connections wanted (1...16; one for a server whose ETags proved unreliable).
        ///   - connectionPrimed: whether a request (a HEAD) already opened a connection.
        init(
            url: URL, mirrors: [URL] = [], source: Int = 0, hasExpectation: Bool = false, settings: Settings,
            position: TransferPosition, connections: Int, connectionPrimed: Bool
        ) {
            sources = [url] + mirrors
            self.source = min(max(0, source), mirrors.count)
            self.hasExpectation = hasExpectation
            self.settings = settings
            self.position = position
            // A server whose ETags proved unreliable is continued on one connection, as when it is found out mid-way.
            self.connections = position.metadata.ignoresETag ? 1 : connections
            self.connectionPrimed = connectionPrimed
            sizing = WindowSizing(base: settings.windowSize, maximum: settings.maximumWindowSize)
        }
    }
}

// MARK: - Events

extension Transfer.StateMachine {
    /// Ready for the next step: the file is whole, or the next request (or segmented fetch) is chosen.
    /// - Parameter warmConnection: whether the session has an idle connection to the server (no short first request).
    mutating func next(warmConnection: Bool) -> Action {
        guard state == .ready else { return unexpected("next") }
        if fetchesInSegments {
            state = .segments
            return .fetchSegments(connections: connections)
        }
        let metadata = position.metadata
        if let total = metadata.totalLength {
            if position.offset == total {
                state = .verifying
                return .verify
            }
            if position.offset > total { return restart(reason: "the partial file is longer than the resource") }
        }
        if !metadata.rangesSupported && position.offset > 0 {
            // No way to ask for the rest: the next request streams the whole resource from byte 0.
            position.startOver()
            return .startOver(
                announced: metadata.announced, metadata: metadata,
                reason: "the server does not serve ranges: the whole file again from byte 0")
        }
        var window = Window(target: redirectTarget ?? (source > 0 ? sources[source] : nil), start: position.offset)
        window.sameVersionOnly = source > 0 && !hasExpectation && window.start > 0
        if metadata.rangesSupported {
            // Without a strong ETag a continuation cannot ask "still the same version?": it asks for the bytes before
            // `start` as well, and the sink compares them with what the file has.
            if window.start > 0 && !metadata.validators.hasStrongETag {
                window.overlap = Int(min(Int64(Transfer.continuityCheckLength), window.start))
            }
            // A new connection spins while its first request lasts: the run's first request asks for a whole window
            // and is cut short if slow; a later one on a new connection (after a cut or a failure) is short
            // (`Configuration.firstWindowSize`). Several connections want the length early: theirs stays short.
            let opens = !connectionPrimed && !warmConnection
            window.cutWhenSlow = opens && settings.wholeFirstRequest && connections == 1 && !sentRequest
            let first = !opens || window.cutWhenSlow ? sizing.full : settings.firstWindowSize
            let length = min(sizing.full, first, settings.limitedWindowSize ?? .max)
            let last = window.start + length - 1
            window.end = metadata.totalLength.map { min(last, $0 - 1) } ?? last
            if window.start > 0 { window.ifRange = metadata.validators.ifRange }
        }
        window.unwrittenLimit = window.length.flatMap(sizing.unwrittenLimit(forWindowOf:))
        sentRequest = true
        state = .requesting(window)
        return .request(window)
    }

    /// The request of the last `.request` ended.
    /// - Parameters:
    ///   - end: how it ended (`RequestEnd`).
    ///   - report: what its sink saw, with the position after its bytes.
    mutating func requestEnded(_ end: RequestEnd, report: Report) -> Action {
        guard case .requesting(let window) = state else { return unexpected("requestEnded") }
        position = report.position
        peakUnwritten = max(peakUnwritten, report.peakUnwritten)
        connectionPrimed = true
        state = .ready
        switch end {
        case .finished:
            if let answered = report.respondingURL, answered != url { redirectTarget = answered }
            if report.isWholeStream {
                state = .verifying  // a long stream was checkpointed as it went
                return .verify
            }
            if let length = window.length {
                sizing.windowEnded(
                    length: length, peakUnwritten: report.peakUnwritten, hashFellBehind: report.hashFellBehind)
            }
            // Neither the last window of a file (verification follows at once) nor a small file is checkpointed.
            let total = position.metadata.totalLength
            let small = total.map { ResponseJudge.isSmall($0, windowSize: settings.windowSize) } ?? false
            let checkpoint = !small && total != position.offset ? position.metadata : nil
            // A short window of a resource of unknown length: its end.
            var endsAfter = false
            if total == nil, let length = window.length, report.received < length + Int64(window.overlap) {
                position.metadata.totalLength = position.offset
                endsAfter = true
            }
            state = .waitingForDisk(endsAfter: endsAfter)
            return .waitForDisk(checkpoint: checkpoint)
        case .failed(let error) where redirectTarget != nil && Transfer.sendsBackToOriginal(error):
            // The target refused (an expired signature, a moved object): ask the URL itself again.
            redirectTarget = nil
            return .proceed
        case .restartFromZero(let reason):
            return restart(reason: reason)
        case .unsatisfiable(let completeLength):
            redirectTarget = nil
            if let completeLength, completeLength == position.offset {
                position.metadata.totalLength = completeLength
                state = .verifying
                return .verify
            }
            if let completeLength, completeLength < position.offset {
                var action = restart(reason: "the server cannot serve bytes from \(position.offset)")
                if case .startOver(let announced, var metadata, let reason) = action {
                    position.metadata.totalLength = completeLength
                    metadata.totalLength = completeLength
                    action = .startOver(announced: announced, metadata: metadata, reason: reason)
                }
                return action
            }
            // A 416 for bytes the resource has (or with no length at all): this server's ranges are broken.
            return fetchWhole(
                reason: "the server refuses a range of bytes it has (416): it is fetched whole, without ranges")
        case .wholeWithoutRanges(let reason):
            return fetchWhole(reason: reason)
        case .unreliableETag(let reason):
            // The same bytes from backends that disagree on ETags: judged by length, Last-Modified and the bytes before
            // each resume point (the continuity check of a resource without a strong validator).
            position.metadata.ignoreETags()
            connections = 1
            return .warn(reason)
        case .cutShort:
            // Its connection closed with it: the next request opens another, short at first.
            if let answered = report.respondingURL, answered != url { redirectTarget = answered }
            connectionPrimed = false
            state = .waitingForDisk(endsAfter: false)
            return .drainThenCheckpoint(position.metadata)
        case .diskBehind:
            // What arrived is kept; the next windows, of the base size again, wait for the disk as windows do. A new
            // version streamed here counts as a restart: a resource that changes with every request must not loop.
            if report.isOtherVersion {
                guard restarts < settings.maximumRestarts else {
                    let reason = "the resource changed with every request; restarted \(restarts) times"
                    return stop(.stop(.fileChanged(url, reason: reason)))
                }
                restarts += 1
            }
            sizing.diskFellBehind()
            state = .waitingForDisk(endsAfter: false)
            return .drainThenCheckpoint(position.metadata)
        case .failed(let error):
            return nextSource(after: error) ?? stop(.stop(error))
        case .cancelled:
            return stop(.stop(.cancelled(url)))
        }
    }

    /// Whether the file is whole once the disk passes the mark of the last `.waitForDisk`: the steps left are the
    /// digest's check and the placement, which the executor may take in one hop (`Transfer.finish`).
    var isWholeAfterDisk: Bool {
        guard case .waitingForDisk(let endsAfter) = state else { return false }
        if endsAfter { return true }
        return !fetchesInSegments && position.metadata.totalLength == position.offset
    }

    /// The disk passed the mark of the last `.waitForDisk` or `.drainThenCheckpoint`.
    /// - Parameter failure: the disk's failure, if it failed.
    mutating func diskPassedMark(failure: DownloadError?) -> Action {
        guard case .waitingForDisk(let endsAfter) = state else { return unexpected("diskPassedMark") }
        if let failure { return stop(.stop(failure)) }
        state = endsAfter ? .verifying : .ready
        return endsAfter ? .verify : .proceed
    }

    /// Every connection of the segmented fetch is idle: it ended (`Segments.outcome`, else every byte arrived).
    mutating func segmentsEnded() -> Action {
        guard state == .segments, let run = segments, run.busy.isEmpty else { return unexpected("segmentsEnded") }
        segments = nil
        state = .ready
        switch run.outcome ?? .finished {
        case .finished:
            guard run.plan.isComplete else { return stop(.stop(.cancelled(url))) }
            position.resume(at: position.metadata.totalLength ?? position.offset)
            position.written = nil
            state = .verifying
            return .verify
        case .fallBack(let reason):
            // Never a spliced file: the current version from byte 0, on one connection for the rest of the run.
            connections = 1
            return restart(reason: reason)
        case .continueAlone(let reason):
            // The bytes that arrived stay where they are; the missing ones are fetched on one connection (still at
            // their offsets), judged by length and Last-Modified (chaos run: a restart fetched up to 1.9 times the
            // file from such servers).
            let total = position.metadata.totalLength ?? position.offset
            let missing = run.plan.unrequested
            let watermark = missing.first?.lowerBound ?? total
            // What arrived: everything after the watermark that is not missing.
            var written: [Range<Int64>] = []
            var cursor = watermark
            for gap in missing {
                if gap.lowerBound > cursor { written.append(cursor..<gap.lowerBound) }
                cursor = max(cursor, gap.upperBound)
            }
            if cursor < total { written.append(cursor..<total) }
            position.resume(at: watermark)
            position.written = written
            position.metadata.ignoreETags()
            connections = 1
            return .warn(reason)
        case .failed(let error):
            return nextSource(after: error) ?? stop(.stop(error))
        case .cancelled:
            return stop(.stop(.cancelled(url)))
        }
    }

    /// The whole file was hashed after a `.verify`.
    /// - Parameter mismatch: the checksum error when the digest differs from the expected one, else `nil`.
    mutating func digestChecked(mismatch: DownloadError?) -> Action {
        guard state == .verifying else { return unexpected("digestChecked") }
        guard let mismatch else {
            state = .placing
            return .place
        }
        // Once: a file damaged on the way (or on disk) is fetched again; a second mismatch is the answer.
        guard !position.metadata.restartedAfterMismatch else { return stop(.discard(mismatch)) }
        position.metadata.restartedAfterMismatch = true
        let metadata = position.metadata
        position.startOver()
        state = .ready
        return .startOver(
            announced: metadata.announced, metadata: metadata,
            reason: "\(mismatch.reason): fetched once more from byte 0")
    }

    /// The task was cancelled (a pause, a removal, a shutdown).
    mutating func cancel() -> Action {
        stop(.stop(.cancelled(url)))
    }
}

// MARK: - Rules

extension Transfer.StateMachine {
    /// Whether a segmented fetch was asked for (`.fetchSegments`) and has not ended.
    var isFetchingSegments: Bool { state == .segments }

    /// The URLs segments are spread over: the source in use, then the mirrors after it (`nil`: the URL itself).
    var segmentSources: [URL?] {
        (source..<sources.count).map { $0 == 0 ? nil : sources[$0] }
    }

    /// Whether the rest of the file is fetched in segments: a file begun in segments always continues so (its missing
    /// bytes are not all at its end); otherwise only with several connections wanted, a known length, Range honoured
    /// with a validator to send as `If-Range` on every segment, and at least two segments' worth of bytes left.
    var fetchesInSegments: Bool {
        // Bytes after a gap cannot be appended to: such a file goes on in segments (a response that shows another
        // version, or Range ignored, then restarts it).
        if position.written != nil { return position.metadata.totalLength != nil }
        // The cheap conditions first, and the metadata read where it is: a copy of it cost a small file 3,800
        // instructions (issue #52).
        guard connections > 1, position.offset > 0, let total = position.metadata.totalLength,
            total - position.offset >= 2 * settings.minimumSegmentSize, position.metadata.rangesSupported
        else { return false }
        return position.metadata.validators.ifRange != nil
    }

    /// Goes on from the next mirror after a request failed, unless the failure is not the source's (the disk, a
    /// cancellation, the caller's `prepareRequest`) or no mirror is left.
    /// - Returns: a warning to show, then `proceed`; `nil` when the failure stands.
    private mutating func nextSource(after error: DownloadError) -> Action? {
        let notTheSource: [DownloadError] = [.cancelled, .suspended, .fileSystem, .requestPreparationFailed]
        guard source + 1 < sources.count, !notTheSource.contains(error) else { return nil }
        source += 1
        redirectTarget = nil
        connectionPrimed = false  // another server, probably: a new connection
        if position.offset > 0 && hasExpectation {
            // The checksum checks the whole file at the end: the mirror's own validators are taken, and the bytes
            // before each resume point are compared (no splice of another file).
            position.metadata.validators = Validators()
        }
        return .warn(Transfer.switchingMessage(after: error, to: sources[source]))
    }

    /// Starts the current version again from byte 0, giving up after too many restarts (the file is deleted).
    private mutating func restart(reason: String) -> Action {
        redirectTarget = nil
        guard restarts < settings.maximumRestarts else {
            let reason = "\(reason); restarted \(settings.maximumRestarts) times"
            return stop(.discard(.fileChanged(url, reason: reason)))
        }
        restarts += 1
        var metadata = ResourceMetadata()
        metadata.suggestedFilename = position.metadata.suggestedFilename
        metadata.restartedAfterMismatch = position.metadata.restartedAfterMismatch
        // What was learnt about the server holds for the whole download.
        metadata.ignoresETag = position.metadata.ignoresETag
        metadata.rangesSupported = !position.wholeOnly
        position.metadata = metadata
        position.startOver()
        state = .ready
        return .startOver(announced: [], metadata: metadata, reason: "\(reason): starting again from byte 0")
    }

    /// Fetches the resource whole, without `Range`, from now on: once per download (a second time is an error).
    private mutating func fetchWhole(reason: String) -> Action {
        guard !position.wholeOnly else {
            return stop(.stop(.invalidResponse(url, reason: reason + ", and failed again so")))
        }
        position.wholeOnly = true
        position.metadata.rangesSupported = false
        connections = 1
        return .warn(reason)
    }

    private mutating func stop(_ action: Action) -> Action {
        state = .stopped
        return action
    }

    /// An event the executor never sends in this state: a programming error, which stops the transfer clearly (in
    /// debug builds it traps). After the end, any event just answers `stop` again.
    private mutating func unexpected(_ event: String) -> Action {
        // After the end every event answers `stop`: nothing is requested any more.
        if isFinished { return stop(.stop(.cancelled(url))) }
        assertionFailure("Transfer.StateMachine: \(event) in \(state)")
        return stop(.stop(.invalidResponse(url, reason: "internal error: \(event) in \(state)")))
    }
}

/// The words of `Transfer.StateMachine`: its settings, the request it asks for, what a request's sink reports, and
/// the actions.
extension Transfer.StateMachine {
    /// The engine settings the decisions use: the transfer's configuration (its fields read through, as
    /// `settings.windowSize`), and what the bandwidth limits allow.
    @dynamicMemberLookup
    struct Settings: Sendable, Equatable {
        let configuration: Transfer.Configuration
        /// The longest window the bandwidth limits allow (`nil`: no limit).
        let limitedWindowSize: Int64?

        init(_ configuration: Transfer.Configuration, limitedWindowSize: Int64? = nil) {
            self.configuration = configuration
            self.limitedWindowSize = limitedWindowSize
        }

        subscript<Value>(dynamicMember field: KeyPath<Transfer.Configuration, Value>) -> Value {
            configuration[keyPath: field]
        }

        /// Whether a run's first request on a new connection asks for a whole window, cut short when slow
        /// (`Transfer.Configuration.firstRequestBudget`).
        var wholeFirstRequest: Bool { configuration.firstRequestBudget != nil }
    }

    /// One GET to send.
    struct Window: Sendable, Equatable {
        /// Where the URL redirected to earlier in this run (`nil`: the URL itself).
        var target: URL?
        /// The resume point: the first byte this window adds.
        var start: Int64
        /// Bytes before `start` asked for again and compared with the file's (no strong validator).
        var overlap = 0
        /// The last byte asked for (`nil`: no `Range` header, the whole resource).
        var end: Int64?
        /// The `If-Range` value, on a continuation.
        var ifRange: String?
        /// For a grown window, the most received bytes that may wait for the disk before it ends early.
        var unwrittenLimit: Int64?
        /// Whether the response must prove the version the file has (a continuation from a mirror without an
        /// expected checksum): another version fails the request instead of starting the file again.
        var sameVersionOnly = false
        /// Whether it opens a connection with a whole window, to be cut short (`RequestEnd.cutShort`) if it would
        /// spin long (`FirstRequestBudget`).
        var cutWhenSlow = false

        /// The first byte the `Range` header names.
        var requestStart: Int64 { start - Int64(overlap) }
        /// The bytes from `start` it asks for (`nil` without a `Range`).
        var length: Int64? { end.map { $0 - start + 1 } }
    }

    /// What a request's sink saw, handed back when the request ended.
    struct Report: Sendable {
        /// The network side, after the request's accepted bytes.
        var position: TransferPosition
        var respondingURL: URL?
        var isWholeStream = false
        var isOtherVersion = false
        /// Body bytes received, the overlap included.
        var received: Int64 = 0
        var peakUnwritten: Int64 = 0
        var hashFellBehind = false
    }

    /// What the executor does next; the comment says which event answers it. (Errors compare by their code.)
    enum Action: Sendable, Equatable {
        /// Nothing to carry out: `next(warmConnection:)` (or `cancel()` when the task was cancelled).
        case proceed
        /// Send this GET; `requestEnded(_:report:)`.
        case request(Window)
        /// Fetch every missing byte over several connections: `startSegments()`, then its events until every connection
        /// is idle; `segmentsEnded()`.
        case fetchSegments(connections: Int)
        /// Empty the partial file and the hash (`DiskCommand.startOver`) and save this metadata, telling the caller
        /// why (`reason`, a warning); then `proceed`.
        case startOver(announced: [Checksum], metadata: ResourceMetadata, reason: String)
        /// Tell the user (bytes were not used, or ranges given up); then `proceed`.
        case warn(String)
        /// Save this checkpoint, if any, and wait until the disk is past the middle of the last window;
        /// `diskPassedMark(failure:)`.
        case waitForDisk(checkpoint: ResourceMetadata?)
        /// Wait until everything received is written, then save this metadata; `diskPassedMark(failure:)`.
        case drainThenCheckpoint(ResourceMetadata)
        /// Every byte is in: check lengths and the digest; `digestChecked(mismatch:)`.
        case verify
        /// The file is right: move it into the completed area.
        case place
        /// End early, keeping the partial file and its state for the next run.
        case stop(DownloadError)
        /// End early, deleting the partial file (nothing in it can be used again).
        case discard(DownloadError)
    }
}
