import Dispatch
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The lean path of a fresh download (issue #52): most files of a long list are small, new, and arrive whole in their
/// first response. Such a file is kept in memory as it arrives and finished in one step — written, hashed, checked,
/// recorded and placed — without the disk pipeline's queues, fences and commands: on the transfer's own thread when
/// it is small and the disk fast, else in one hop to a `Blocking` thread (`InlineFinishRule`). The
/// transfer's state machine still takes every decision (the same window, the same verdicts, the same digest rule);
/// only the disk work is done plainly.
///
/// Anything else goes on on the general path from where it is, with nothing asked twice: a response that is not a small
/// whole file is handed, from its head on, to a `WindowSink` on a disk pipeline made then; a request that ends
/// otherwise (a failure, a cancellation, a cut of the first request) hands its bytes to a new pipeline; a digest
/// that differs is handled by the machine's rule (fetched once more from byte 0).
extension Transfer {
    /// Where the general path starts when the lean one of a fresh download hands over (`fetchFresh`): its pipeline,
    /// the machine after the first request, and what it does next.
    struct Carried: Sendable {
        let pipeline: DiskPipeline
        let machine: StateMachine
        let action: StateMachine.Action
        let halfway: DiskFence?
        let computed: Checksum?
    }

    /// How the lean path ended.
    enum FreshEnd: Sendable {
        /// The file is in the completed area.
        case placed(TransferResult)
        /// The general path goes on from here.
        case goOn(Carried)
    }

    /// The machine of a fresh download that may take the lean path, and its first action: no saved state, nothing
    /// where it would deliver (as `startFreshWithoutHop` finds), nothing it replaces, no mirror, no blocks to reserve
    /// and no test hook. `nil` otherwise: the general path runs from the start.
    func freshStart(hasState: Bool, expected: Checksum?) -> (StateMachine, StateMachine.Action)? {
        guard !hasState, replacing == nil, options.mirrors.isEmpty, configuration.fileAllocation == .none,
            nothingDelivered
        else { return nil }
        var machine = StateMachine(
            url: url, hasExpectation: expected != nil, settings: machineSettings,
            position: TransferPosition(), connections: requestedConnections, connectionPrimed: false)
        let action =
            Task.isCancelled
            ? machine.cancel() : machine.next(warmConnection: bridge.hasWarmConnection(toOrigin: origin))
        return (machine, action)
    }

    /// A disk pipeline for a fresh download, prepared as `startFreshWithoutHop` prepares it.
    func freshPipeline(_ files: PartialFiles, expected: Checksum?) -> DiskPipeline {
        let pipeline = makePipeline(files, expected: expected)
        startFresh(pipeline)
        return pipeline
    }

    /// Sends a fresh download's first request on the lean path, and finishes a small file that arrived whole.
    /// - Parameters:
    ///   - start: the machine and its first action (`freshStart`).
    ///   - files: the download's partial files.
    ///   - expected: the caller's checksum, if any.
    /// - Returns: the placed file, or where the general path goes on.
    /// - Throws: what finishing the file throws (the disk, the placement).
    func fetchFresh(
        _ start: (StateMachine, StateMachine.Action), files: PartialFiles, expected: Checksum?
    ) async throws(DownloadError) -> FreshEnd {
        var (machine, action) = start
        guard case .request(let window) = action, window.target == nil, window.overlap == 0,
            window.requestStart == 0, window.unwrittenLimit == nil, !window.sameVersionOnly
        else {
            return .goOn(
                Carried(
                    pipeline: freshPipeline(files, expected: expected), machine: machine, action: action, halfway: nil,
                    computed: nil))
        }
        guard await waitForTurn(window) else {
            return .goOn(
                Carried(
                    pipeline: freshPipeline(files, expected: expected), machine: machine, action: machine.cancel(),
                    halfway: nil, computed: nil))
        }
        let sink = FreshFileSink(
            url: url, window: window, configuration: configuration, observer: observer,
            budget: window.cutWhenSlow ? configuration.firstRequestBudget : nil
        ) { [self] in
            let pipeline = freshPipeline(files, expected: expected)
            return (pipeline, makeWindowSink(window, pipeline: pipeline, position: TransferPosition()))
        }
        let end = await perform(makeRequest(for: window), sink: sink)
        if let general = sink.general, let pipeline = sink.generalPipeline {
            action = windowEnded(end, sink: general, machine: &machine)
            return .goOn(
                Carried(pipeline: pipeline, machine: machine, action: action, halfway: general.halfway, computed: nil))
        }
        let report = StateMachine.Report(
            position: sink.position, respondingURL: sink.respondingURL, isWholeStream: sink.isWholeStream,
            received: sink.received, peakUnwritten: sink.received)
        action = machine.requestEnded(end, report: report)
        if case .finished = end, !Task.isCancelled {
            let (body, decided, next) = (sink.body, machine, action)
            // Inline on this cooperative thread when the rule allows (a small body, one at a time, a fast disk),
            // else on a `Blocking` thread: `InlineFinishRule` says why.
            let finished = try await configuration.finishes.run(bodyCount: body.count) {
                () throws(DownloadError) -> FreshFinish in
                try self.finishFresh(body, files: files, machine: decided, action: next, expected: expected)
            }
            switch finished {
            case .placed(let result):
                return .placed(result)
            case .goOn(let next, let nextAction, let computed):
                return .goOn(
                    Carried(
                        pipeline: freshPipeline(files, expected: expected), machine: next, action: nextAction,
                        halfway: nil, computed: computed))
            case .notWhole:
                break
            }
        }
        return .goOn(
            Carried(
                pipeline: await spill(sink, files: files, expected: expected), machine: machine, action: action,
                halfway: nil, computed: nil))
    }

    /// Saves the state of a whole, verified partial file whose placement failed, once its bytes are durable, as
    /// `DiskPipeline.checkpoint` would: the next run proves it current with a HEAD and moves it.
    private func saveWholeState(_ files: PartialFiles, metadata: ResourceMetadata, hash: StreamingHash?, length: Int64)
    {
        guard let fd = try? files.openPartial(.read) else { return }
        defer { _ = closeDescriptor(fd) }
        guard syncData(fd) == 0 else { return }
        let state = PartialState(
            url: url, hashedLength: hash != nil ? length : 0, hash: hash, validators: metadata.validators,
            totalLength: metadata.totalLength, rangesSupported: metadata.rangesSupported,
            suggestedFilename: metadata.suggestedFilename, announced: metadata.announced,
            restartedAfterMismatch: metadata.restartedAfterMismatch, ignoresETag: metadata.ignoresETag,
            file: FileIdentity(descriptor: fd), boot: Boot.identifier)
        try? files.saveState(state)
    }

    /// A pipeline that holds what the lean request accepted, as a `WindowSink` would have sent it, written and hashed
    /// before the general path goes on: a stop (a suspend, a signal) then keeps it for the next run like bytes the
    /// general path wrote as they came, instead of dropping what only reached memory (issue #48's rule for a body
    /// the disk is behind; here at most 1 MiB, written at once).
    private func spill(_ sink: FreshFileSink, files: PartialFiles, expected: Checksum?) async -> DiskPipeline {
        let pipeline = freshPipeline(files, expected: expected)
        guard sink.accepted else { return pipeline }
        let metadata = sink.position.metadata
        _ = pipeline.send(.startOver(announced: metadata.announced))
        let resumable = metadata.rangesSupported && metadata.validators.ifRange != nil && metadata.totalLength != nil
        _ = pipeline.send(.describe(metadata, checkpointEvery: nil, paced: !sink.isWholeStream || resumable))
        if !sink.body.isEmpty { _ = pipeline.send(.write(sink.body), wake: .now) }
        await pipeline.drained()
        return pipeline
    }

    /// How `finishFresh` ended.
    private enum FreshFinish: Sendable {
        /// The file is in the completed area.
        case placed(TransferResult)
        /// The machine chose another step than the placement (after a wrong digest): the partial file is gone.
        case goOn(StateMachine, StateMachine.Action, Checksum?)
        /// The machine does not verify next (the file is not whole): nothing was written.
        case notWhole
    }

    /// The lean path's last steps together: the body written to a new partial file, hashed, checked as `verify`
    /// checks, recorded and placed as `complete` does — each as the machine decides.
    private func finishFresh(
        _ body: Data, files: PartialFiles, machine: StateMachine, action: StateMachine.Action, expected: Checksum?
    ) throws(DownloadError) -> FreshFinish {
        var (machine, action) = (machine, action)
        if case .waitForDisk(nil) = action, machine.isWholeAfterDisk {
            action = machine.diskPassedMark(failure: nil)
            if case .proceed = action { action = machine.next(warmConnection: false) }
        }
        guard case .verify = action else { return .notWhole }
        let metadata = machine.position.metadata
        let length = Int64(body.count)
        if let total = metadata.totalLength, total != length {
            throw .invalidResponse(url, reason: "the file has \(length) bytes, the server announced \(total)")
        }
        if configuration.checksFreeSpace, length > 0,
            let free = files.folder.freeBytesIfShort(of: length, in: .partial)
        {
            throw .fileSystem(
                url,
                reason: "not enough free space: \(ByteSize.text(length)) still to come, "
                    + "\(ByteSize.text(free)) free on the disk of \(files.partialURL.path)")
        }
        let writer = FileWriter(descriptor: try files.openPartial(.create), fileName: files.partialName)
        let failure = body.withUnsafeBytes { bytes -> DownloadError? in
            do throws(DownloadError) {
                try writer.write(bytes, downloadURL: url)
                return nil
            } catch {
                return error
            }
        }
        if let failure {
            writer.close()
            files.removePartial()
            throw failure
        }
        observer.transferProgressed(written: length, total: metadata.totalLength ?? length)
        let algorithm: Checksum.Algorithm? =
            expected?.algorithm
            ?? (options.computesChecksum ? DigestHeaders.preferred(metadata.announced)?.algorithm ?? .md5 : nil)
        let hash = algorithm.map { algorithm in
            var hash = StreamingHash(algorithm)
            body.withUnsafeBytes { hash.update(bufferPointer: $0) }
            return hash
        }
        let computed = hash?.finalize()
        var mismatch: DownloadError?
        if let computed, let target = target(expected, metadata: metadata, computed: computed), target != computed {
            mismatch = .checksumMismatch(url, expected: target, actual: computed)
        }
        action = machine.digestChecked(mismatch: mismatch)
        guard case .place = action else {
            writer.close()
            files.removePartial()
            return .goOn(machine, action, computed)
        }
        if let fd = writer.openDescriptor { recordFile(fd, length: length, metadata: metadata, checksum: computed) }
        writer.close()
        let placed: (file: URL, name: String)
        do throws(DownloadError) {
            placed = try placeVerified(files, length: length, metadata: metadata, checksum: computed, replacing: nil)
        } catch {
            // The file is whole and verified: a later run only has to move it (as `place` keeps it).
            saveWholeState(files, metadata: metadata, hash: hash, length: length)
            throw error
        }
        return .placed(
            TransferResult(
                fileURL: placed.file, checksum: computed,
                verification: verification(computed, expected: expected, metadata: metadata), length: length,
                resumedBytes: 0, receivedBytes: length, suggestedFilename: metadata.suggestedFilename,
                peakBufferedBytes: length, peakUnwrittenBytes: machine.peakUnwritten, placedName: placed.name))
    }
}

/// The sink of a fresh download's first request on the lean path (`Transfer.fetchFresh`). A small file that arrives
/// whole in this response is kept in memory, judged and counted as `WindowSink` does (the response judge, the
/// announced length, the first request's budget); any other response is handed, from its head on, to a `WindowSink` on
/// a disk pipeline made then (`general`), so that the general path goes on from this request.
///
/// Like every sink, it is called on the session's delegate queue only; the transfer reads it after the request ended.
final class FreshFileSink: TransferSink, @unchecked Sendable {
    private let url: URL
    private let window: Transfer.StateMachine.Window
    private let windowSize: Int64
    /// The most body bytes kept in memory: within the bytes a body may keep waiting for the disk, so the end rule
    /// never ends this request for the disk's sake.
    private let largestBody: Int64
    private let makeGeneral: () -> (DiskPipeline, WindowSink)
    /// Told the bytes received while the body arrives (they reach the disk when it is whole).
    private let observer: any TransferObserver
    private var endRule: Transfer.StateMachine.WindowEndRule
    private var ruleResponse = Transfer.StateMachine.WindowEndRule.Response(isWholeStream: false, resumable: false)
    private var judgementScheduled = false
    private var expectedBodyLength: Int64 = 0

    /// The general path's sink and its pipeline, once the response was not a small whole file.
    private(set) var general: WindowSink?
    private(set) var generalPipeline: DiskPipeline?
    /// The network side: the metadata the response left, and the bytes accepted.
    private(set) var position = TransferPosition()
    /// Whether a response was accepted as a small whole file.
    private(set) var accepted = false
    /// Its body so far.
    private(set) var body = Data()
    private(set) var received: Int64 = 0
    /// Whether it is a 200.
    private(set) var isWholeStream = false
    /// The URL that answered, after any redirects.
    private(set) var respondingURL: URL?

    init(
        url: URL, window: Transfer.StateMachine.Window, configuration: Transfer.Configuration,
        observer: any TransferObserver, budget: FirstRequestBudget?,
        makeGeneral: @escaping () -> (DiskPipeline, WindowSink)
    ) {
        self.url = url
        self.observer = observer
        self.window = window
        self.windowSize = configuration.windowSize
        self.largestBody = min(ResponseJudge.uncheckpointedSize, configuration.maximumUnwrittenBytes)
        self.makeGeneral = makeGeneral
        endRule = .init(
            softUnwritten: configuration.maximumUnwrittenBytes, behindGrace: configuration.diskBehindGrace,
            firstRequestBudget: budget)
    }

    func receive(response: URLResponse) -> RequestEnd? {
        guard let http = response as? HTTPURLResponse else {
            return .failed(.invalidResponse(url, reason: "not an HTTP response"))
        }
        respondingURL = http.url
        let request = WindowRequest(
            start: 0, end: window.end, ranged: window.end != nil, resumeOffset: 0, windowSize: windowSize)
        let metadata: ResourceMetadata
        switch ResponseJudge.judge(http.head, request: request, known: position.metadata, url: url) {
        case .end(let end):
            return end
        case .begin(let judged, let bodyLength, checkpoint: false)
        where judged.totalLength == bodyLength && bodyLength <= largestBody:
            (metadata, expectedBodyLength) = (judged, bodyLength)
        case .replace(let judged, let bodyLength?, checkpoint: false) where bodyLength <= largestBody:
            (metadata, expectedBodyLength, isWholeStream) = (judged, bodyLength, true)
        default:
            let (pipeline, sink) = makeGeneral()
            (general, generalPipeline) = (sink, pipeline)
            return sink.receive(response: response)
        }
        accepted = true
        position.metadata = metadata
        position.keepsRecentBytes = !metadata.validators.hasStrongETag
        let resumable = metadata.rangesSupported && metadata.validators.ifRange != nil
        ruleResponse = .init(
            isWholeStream: isWholeStream, resumable: resumable && metadata.totalLength != nil,
            expectedBodyLength: expectedBodyLength)
        if expectedBodyLength > 0 { body.reserveCapacity(Int(expectedBodyLength)) }
        return nil
    }

    func receive(data: Data, queued: Int64) -> RequestEnd? {
        if let sink = general { return sink.receive(data: data, queued: queued) }
        let count = Int64(data.count)
        guard received + count <= expectedBodyLength else {
            return .failed(
                .invalidResponse(url, reason: "the server sent more than the \(expectedBodyLength) bytes it announced"))
        }
        received += count
        position.accept(data)
        body.append(data)
        // A body of one chunk (most small files) is counted once, when it is written.
        if received < expectedBodyLength {
            observer.transferProgressed(written: received, total: position.metadata.totalLength)
        }
        // Only the first request's budget can end it: the body stays within the bytes that may wait for the disk.
        let waiting = isWholeStream ? received + queued : received
        switch endRule.chunkArrived(received: received, unwritten: waiting, response: ruleResponse, now: Self.now) {
        case .cutShort: return .cutShort
        case .diskBehind: return .diskBehind
        case .proceed, .cannotWait: return nil
        }
    }

    func complete(error: (any Error)?) -> RequestEnd {
        if let sink = general { return sink.complete(error: error) }
        guard accepted || error != nil else {
            return .failed(.connectionFailed(url, reason: "the request ended without a response"))
        }
        let gotEverything = accepted && received == expectedBodyLength
        if let error, !gotEverything {
            return .failed(TransportError.failure(error, url: url))
        }
        if accepted, received < expectedBodyLength {
            return .failed(
                .connectionFailed(url, reason: "the body ended after \(received) of \(expectedBodyLength) bytes"))
        }
        return .finished
    }

    func takeCheckTime() -> UInt64? {
        if let sink = general { return sink.takeCheckTime() }
        guard !judgementScheduled, let time = endRule.judgementTime else { return nil }
        judgementScheduled = true
        return time
    }

    func check(now: UInt64) -> RequestEnd? {
        if let sink = general { return sink.check(now: now) }
        return endRule.judge(received: received, response: ruleResponse, now: now) == .cutShort ? .cutShort : nil
    }

    func keepsData(after end: RequestEnd) -> Bool {
        if let sink = general { return sink.keepsData(after: end) }
        return false
    }

    private static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
}
