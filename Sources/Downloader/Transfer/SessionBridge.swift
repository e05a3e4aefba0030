import Dispatch
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The one `URLSession` of a manager and its delegate. It turns data tasks into `async` requests whose events go to a
/// `TransferSink` on one serial delegate queue.
///
/// Linux facts it is built around (swift-corelibs-foundation): `cancel()` blocks its caller and chunks keep arriving
/// after it, so tasks are resumed and cancelled on a dedicated control queue and a per-task closed flag drops late
/// events; the response disposition is ignored, so sinks validate and the bridge closes rejected tasks itself;
/// redirects keep `Authorization` across hosts, so the bridge strips it; request timeouts are not usable as stall
/// detection, so a watchdog closes tasks that received nothing for `stallTimeout` seconds.
final class SessionBridge: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    /// Settings of the bridge.
    struct Configuration: Sendable {
        /// Close a request that has received nothing for this long (seconds).
        var stallTimeout: Double = 30
        /// Follow at most this many redirects per request.
        var maximumRedirects: Int = 10
        /// Connections per host; keep it at least the number of active downloads.
        var maximumConnectionsPerHost: Int = 8
        /// Close a request that received fewer than `bytesPerSecond × seconds` bytes in any `seconds` (a body that
        /// trickles is a stall too); `nil` checks only `stallTimeout`.
        var lowestSpeed: (bytesPerSecond: Double, seconds: Double)?
        /// The `User-Agent` of a request that has none (`nil`: libcurl's).
        var userAgent: String?
        /// Called before every request; a throw ends the request with `.failed` (see
        /// `DownloadManager.Configuration.prepareRequest`).
        var prepareRequest: (@Sendable (URLRequest) async throws -> URLRequest)?
        /// Credentials for hosts that ask for Basic authentication (see `SessionBridge+Authentication`).
        var credentials = HostCredentials()
        /// The most requests in flight to one host over all downloads (`ConnectionGate`); `nil`: no cap, only
        /// refusals ("too many") lower a host's.
        var connectionCap: Int?
        /// The manager's cookies: sent with every request they match, updated by every response (`nil`: none at
        /// all but a redirect chain's own, for that chain).
        var cookies: DownloadCookieJar?
        /// The connection gate's clock, in uptime nanoseconds (`nil`: `DispatchTime`'s). Internal: tests move it.
        var hostClock: (@Sendable () -> UInt64)?
    }

    struct Entry {
        let task: URLSessionDataTask
        let sink: any TransferSink
        let originalURL: URL
        /// `originalURL.origin`, worked out once (about 4,000 instructions each time, issue #52).
        let origin: String
        var continuation: CheckedContinuation<RequestEnd, Never>?
        /// When it was registered, just before its task is resumed (the gate's clock: `ConnectionGate.now`).
        let started: UInt64
        var lastActivity: UInt64
        /// Where the current lowest-speed interval began, and the body bytes received since.
        var speedIntervalStart: UInt64
        var speedIntervalBytes = 0
        /// Its redirects so far, and what the next one gets.
        var redirects: RedirectChain
        /// A `401` offering Basic may be answered (`SessionBridge+Authentication`); whether this hop carried
        /// credentials already.
        var answersChallenge: Bool
        var sentCredentials: Bool
        /// Open, redirecting or closed (with how it ended, kept for the caller until the task really completes).
        var request = RequestState()
    }

    struct State {
        var entries: [Int: Entry] = [:]
        var invalidated = false
        /// Whether a closed request's caller is answered without waiting for its task to complete
        /// (`answerClosedRequestsAtOnce()`).
        var answersClosedAtOnce = false
        var warm: WarmConnections
        /// The watchdog's ticks (`checkForStalls`).
        var ticks: WatchdogTicks
    }

    let configuration: Configuration
    let state: Locked<State>
    let authentication = Locked(AuthenticationState())
    /// Requests wait here for a connection to their host (`SessionBridge+Hosts`).
    let gate: ConnectionGate
    private let controlQueue = DispatchQueue(label: "Downloader.SessionBridge.control")
    let delegateQueue: OperationQueue
    /// What URLSession holds for `delegateQueue` (`DeliveryBacklog`); touched only on that queue.
    private var backlog = DeliveryBacklog()
    private let watchdog: DispatchSourceTimer
    // Set once in init, before any task exists; read-only afterwards.
    private var session: URLSession!
    /// A copy of the session's configuration (tests).
    var sessionConfiguration: URLSessionConfiguration { session.configuration }

    /// Creates the session.
    init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        let shortest = min(configuration.stallTimeout, configuration.lowestSpeed?.seconds ?? .infinity)
        let interval = max(0.05, min(1, shortest / 4))
        state = Locked(
            State(
                warm: WarmConnections(capacity: configuration.maximumConnectionsPerHost),
                ticks: WatchdogTicks(
                    interval: UInt64(interval * 1e9), start: DispatchTime.now().uptimeNanoseconds)))
        gate = ConnectionGate(cap: configuration.connectionCap, clock: configuration.hostClock)
        delegateQueue = OperationQueue()
        delegateQueue.maxConcurrentOperationCount = 1
        delegateQueue.name = "Downloader.SessionBridge.delegate"
        watchdog = DispatchSource.makeTimerSource(queue: controlQueue)
        super.init()

        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.httpMaximumConnectionsPerHost = max(1, configuration.maximumConnectionsPerHost)
        sessionConfiguration.requestCachePolicy = .reloadIgnoringLocalCacheData
        sessionConfiguration.urlCache = nil
        // Cookies are the bridge's (`Configuration.cookies`): URLSession's storage would replace a request's own
        // `Cookie` header with its cookies (corelibs' `setCookies(on:)`) rather than add to it.
        sessionConfiguration.httpShouldSetCookies = false
        sessionConfiguration.httpCookieStorage = nil
        // Nor does it read them: without `.never`, corelibs parses every response header line as a cookie (a
        // `String`, a split, two trims and `HTTPCookie.cookies(withResponseHeaderFields:for:)`) before it finds no
        // storage to put them in, 0.29 M instructions a small file (`_EasyHandle.setCookies(headerData:)`, issue
        // #52). The `Set-Cookie` headers still reach the response, and the bridge's jar.
        sessionConfiguration.httpCookieAcceptPolicy = .never
        // An idle timer on Linux that also runs while a task waits for a connection: keep it out of the way and let
        // the watchdog judge stalls.
        sessionConfiguration.timeoutIntervalForRequest = max(600, configuration.stallTimeout * 4)
        session = URLSession(configuration: sessionConfiguration, delegate: self, delegateQueue: delegateQueue)

        watchdog.schedule(deadline: .now() + interval, repeating: interval)
        watchdog.setEventHandler { [weak self] in self?.checkForStalls() }
        watchdog.resume()
    }

    /// Performs one request, answering a Basic challenge once when credentials are known (see `perform`).
    /// - Parameters:
    ///   - unprepared: the request.
    ///   - sink: receives its events.
    ///   - origin: `unprepared.url`'s origin when the caller knows it (`nil`: worked out here).
    /// - Returns: how it ended, and the last task's identifier (`nil` when it never became a task).
    func performAuthorized(
        _ unprepared: URLRequest, sink: any TransferSink, origin: String? = nil
    ) async -> (end: RequestEnd, id: Int?) {
        let answers = !configuration.credentials.isEmpty
        let (end, id) = await performOnce(
            authorizingIfKnown(unprepared), sink: sink, answersChallenge: answers, origin: origin)
        guard answers, let id, let retry = answer(toChallengeOf: id, for: unprepared) else { return (end, id) }
        return await performOnce(retry, sink: sink, answersChallenge: false, origin: nil)
    }

    /// Performs one request as it is (see `perform`).
    /// - Returns: how it ended, and its task's identifier (`nil` when it never became a task).
    private func performOnce(
        _ unprepared: URLRequest, sink: any TransferSink, answersChallenge: Bool, origin: String?
    ) async -> (end: RequestEnd, id: Int?) {
        let sink = ErrorBodySink(sink)  // an error status's message is read from its body
        let request: URLRequest
        switch await prepare(unprepared) {
        case .ready(let prepared): request = prepared
        case .ended(let end): return (end, nil)
        }
        // Only the caller's hook may have sent the request elsewhere.
        let origin = configuration.prepareRequest == nil ? origin ?? request.url!.origin : request.url!.origin
        // `dataTask(with:)` waits for the session's internal queue (corelibs), which a cancel or a busy transfer can
        // hold for long: made on the control queue, never on one of the few cooperative threads.
        let session = self.session!
        let task = await withCheckedContinuation { (made: CheckedContinuation<URLSessionDataTask, Never>) in
            controlQueue.async { made.resume(returning: session.dataTask(with: request)) }
        }
        let id = task.taskIdentifier
        let end = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<RequestEnd, Never>) in
                let accepted = state.withLock { state -> Bool in
                    guard !state.invalidated else { return false }
                    // Every request takes an idle connection if there is one; `complete` gives it back.
                    let now = DispatchTime.now().uptimeNanoseconds
                    _ = state.warm.take(origin: origin, now: now)
                    state.entries[id] = Entry(
                        task: task, sink: sink, originalURL: request.url!, origin: origin, continuation: continuation,
                        started: gate.now(), lastActivity: now, speedIntervalStart: now,
                        redirects: RedirectChain(request: request, maximum: configuration.maximumRedirects),
                        answersChallenge: answersChallenge,
                        sentCredentials: request.value(forHTTPHeaderField: "Authorization") != nil
                            || request.url!.hasCredentials)
                    return true
                }
                guard accepted else {
                    continuation.resume(returning: .cancelled)
                    return
                }
                if Task.isCancelled {
                    // Never started: no completion will come, so end it here.
                    let entry = state.withLock { $0.entries.removeValue(forKey: id) }
                    entry?.continuation?.resume(returning: .cancelled)
                } else {
                    controlQueue.async { task.resume() }
                }
            }
        } onCancel: {
            close(taskIdentifier: id, with: .cancelled)
        }
        // The sink wrote its state on the delegate queue before the request ended; taking the lock that side took
        // last makes the hand-off explicit (ThreadSanitizer does not always see it through the continuation).
        state.withLock { _ in }
        return (end, id)
    }

    /// Whether a new request to `origin` (`URL.origin`) would probably reuse an idle connection (see
    /// `WarmConnections`).
    func hasWarmConnection(toOrigin origin: String) -> Bool {
        let now = DispatchTime.now().uptimeNanoseconds
        return state.withLock { $0.warm.hasIdle(origin: origin, now: now) }
    }

    /// Closes a request from any thread: late events are dropped from now on and the task is cancelled on the
    /// control queue. The waiting caller gets `end` when URLSession reports the task complete, so that whatever
    /// follows (a retry, the next download in the queue) never overlaps the old connection.
    /// - Parameters:
    ///   - keepingData: whether bytes that still arrive go to the sink (`TransferSink.keepsData(after:)`), which
    ///     only the delegate queue may ask, where the sink's state lives; a close from any other thread keeps none.
    func close(taskIdentifier id: Int, with end: RequestEnd, keepingData: Bool = false) {
        let (task, answerNow) = markClosed(id, with: end, keepingData: keepingData)
        if answerNow { answerOnDelegateQueue(id) }
        guard let task else { return }
        controlQueue.async { task.cancel() }
    }

    /// Marks a request closed and remembers how it ended.
    /// - Returns: the task to cancel now (`nil` when it was closed already or the cancel must wait for the end of a
    ///   redirect), and whether its caller is answered without waiting for the task (`answerClosedRequestsAtOnce()`).
    private func markClosed(
        _ id: Int, with end: RequestEnd, keepingData: Bool
    ) -> (task: URLSessionDataTask?, answerNow: Bool) {
        state.withLock { state -> (URLSessionDataTask?, Bool) in
            // Never the sink here: this runs on the closing thread (a cancel, the watchdog), and the sink's state is
            // the delegate queue's (ErrorBodySink's `pending` was read here while that queue wrote it: a data race).
            let closed = state.entries.modifyValue(forKey: id) { entry -> URLSessionDataTask? in
                let cancelNow = entry.request.close(
                    with: end, now: DispatchTime.now().uptimeNanoseconds, keepingData: keepingData)
                return cancelNow ? entry.task : nil
            }
            guard let toCancel = closed else { return (nil, false) }  // no such request
            return (toCancel, state.answersClosedAtOnce)
        }
    }

    /// From now on (a shutdown), the caller of a closed request is answered as soon as the delegate queue has passed
    /// the request's events already queued, without waiting for URLSession to complete the task; requests closed
    /// already are answered so too.
    ///
    /// While a body arrives faster than the process takes it, libcurl's queue is never idle, and `cancel()` waits for
    /// it (measured: up to 115 s): a stop must not wait for that. Nothing follows these requests, so the rule that a
    /// closed request's end waits for its task (no overlap with the next request) has nothing to protect; the late
    /// events of the task find no entry and are dropped.
    func answerClosedRequestsAtOnce() {
        let closed = state.withLock { state -> [Int] in
            state.answersClosedAtOnce = true
            return state.entries.filter { !$0.value.request.isOpen }.map(\.key)
        }
        for id in closed { answerOnDelegateQueue(id) }
    }

    /// Answers a closed request's caller with its end once the delegate queue has passed every event queued before
    /// (the sink is then done with it: later events find no entry).
    private func answerOnDelegateQueue(_ id: Int) {
        delegateQueue.addOperation { [self] in
            let ended = state.withLock { state -> (CheckedContinuation<RequestEnd, Never>?, RequestEnd)? in
                guard let entry = state.entries[id], let end = entry.request.pendingEnd else { return nil }
                state.entries[id] = nil
                state.warm.requestEnded(
                    origin: entry.origin, reusable: false, now: DispatchTime.now().uptimeNanoseconds)
                return (entry.continuation, end)
            }
            guard let (continuation, end) = ended else { return }
            continuation?.resume(returning: end)
        }
    }

    /// The task has produced an event: a redirect before it has settled, so a deferred cancel is safe now.
    private func redirectSettled(_ id: Int) {
        let deferred = state.withLock { state -> URLSessionDataTask? in
            state.entries.modifyValue(forKey: id) { entry in entry.request.taskProducedEvent() ? entry.task : nil }
                ?? nil
        }
        if let deferred { controlQueue.async { deferred.cancel() } }
    }

    /// Cancels every request and invalidates the session. The bridge cannot be used afterwards.
    func invalidate() {
        let entries = state.withLock { state -> [Entry] in
            state.invalidated = true
            defer { state.entries.removeAll() }
            return Array(state.entries.values)
        }
        for entry in entries {
            entry.continuation?.resume(returning: entry.request.pendingEnd ?? .cancelled)
        }
        watchdog.cancel()
        let session = self.session!
        // With nothing running, let the session finish gracefully; cancelling is only for what is still in flight.
        if entries.isEmpty {
            controlQueue.async { session.finishTasksAndInvalidate() }
        } else {
            controlQueue.async { session.invalidateAndCancel() }
        }
    }

    // MARK: - Delegate-queue side

    /// The sink of an open request, marking activity for the watchdog; `nil` once closed (for body bytes: once closed
    /// with an end that drops what still arrives).
    private func openSink(_ id: Int, received: Int = 0, forData: Bool = false) -> (any TransferSink)? {
        state.withLock { state in
            // In place: a copy out and back retained and released each of the entry's references, for every chunk.
            state.entries.modifyValue(forKey: id) { entry -> (any TransferSink)? in
                guard forData ? entry.request.deliversData : entry.request.isOpen else { return nil }
                entry.lastActivity = DispatchTime.now().uptimeNanoseconds
                entry.speedIntervalBytes += received
                return entry.sink
            } ?? nil
        }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        let id = dataTask.taskIdentifier
        redirectSettled(id)
        if let http = response as? HTTPURLResponse { configuration.cookies?.take(from: http) }
        guard let sink = openSink(id) else {
            completionHandler(.cancel)
            return
        }
        let credentials = state.withLock { state in
            state.entries[id].map { (answers: $0.answersChallenge, sent: $0.sentCredentials, url: $0.originalURL) }
        }
        if let credentials, credentials.answers,
            takesChallenge(response, taskIdentifier: id, sentCredentials: credentials.sent)
        {
            // Answered by `perform` with the credential: the sink never hears of this response.
            close(taskIdentifier: id, with: .failed(.httpStatus(401, url: credentials.url)))
            completionHandler(.cancel)
            return
        }
        if refusesAsTooMany(response, taskIdentifier: id) {
            // Asked again by `perform` when the host has room: the sink never hears of this response.
            close(taskIdentifier: id, with: .cancelled)
            completionHandler(.cancel)
            return
        }
        if let end = sink.receive(response: response) {
            close(taskIdentifier: id, with: end, keepingData: sink.keepsData(after: end))
            completionHandler(.cancel)
        } else {
            completionHandler(.allow)
            if let time = sink.takeCheckTime() { scheduleCheck(id, at: time) }
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let id = dataTask.taskIdentifier
        guard let sink = openSink(id, received: data.count, forData: true) else { return }
        if backlog.delivering(data.count, to: id) {
            let alone = state.withLock { state in !state.entries.contains { $0.key != id && $0.value.request.isOpen } }
            backlog.counted(operations: delegateQueue.operationCount, alone: alone ? id : nil)
        }
        if let end = sink.receive(data: data, queued: Int64(backlog.estimate(for: id))) {
            close(taskIdentifier: id, with: end, keepingData: sink.keepsData(after: end))
        } else if let time = sink.takeCheckTime() {
            scheduleCheck(id, at: time)
        }
    }

    /// Runs the sink's `check(now:)` on the delegate queue at `time` (uptime nanoseconds), if the request is still
    /// open then: a sink's judgement that must not wait for the next bytes (`TransferSink.takeCheckTime()`).
    private func scheduleCheck(_ id: Int, at time: UInt64) {
        let now = DispatchTime.now().uptimeNanoseconds
        let delay = DispatchTimeInterval.nanoseconds(Int(clamping: time > now ? time - now : 0))
        controlQueue.asyncAfter(deadline: .now() + delay) { [weak self] in
            self?.delegateQueue.addOperation { [weak self] in
                guard let self else { return }
                // Not `openSink`: a check is no activity for the stall watchdog.
                let sink = state.withLock { state in state.entries[id].flatMap { $0.request.isOpen ? $0.sink : nil } }
                if let sink, let end = sink.check(now: DispatchTime.now().uptimeNanoseconds) {
                    close(taskIdentifier: id, with: end, keepingData: sink.keepsData(after: end))
                }
            }
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let id = task.taskIdentifier
        redirectSettled(id)
        let finished = state.withLock {
            state -> (any TransferSink, CheckedContinuation<RequestEnd, Never>?, RequestEnd?, String)? in
            guard let entry = state.entries.removeValue(forKey: id) else { return nil }
            return (entry.sink, entry.continuation, entry.request.pendingEnd, entry.origin)
        }
        guard let (sink, continuation, pendingEnd, origin) = finished else { return }
        let end: RequestEnd
        if let pendingEnd {
            end = pendingEnd
        } else {
            end = sink.complete(error: error)
        }
        // Only a request that ended normally leaves its connection in libcurl's cache (a closed one drops it).
        var reusable = false
        if case .finished = end, pendingEnd == nil, error == nil { reusable = true }
        let now = DispatchTime.now().uptimeNanoseconds
        // Also publishes the sink's last writes to the caller (see `perform`).
        state.withLock { $0.warm.requestEnded(origin: origin, reusable: reusable, now: now) }
        continuation?.resume(returning: end)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        enum Decision {
            /// Closed already: its cancel is on the way. Calling the handler now could reach the task after the
            /// cancel, which corelibs traps on; leaving it uncalled lets the cancel end the task.
            case leave
            case follow(URLRequest)
            case refuse(RequestEnd)
        }
        let id = task.taskIdentifier
        let decision = state.withLock { state -> Decision in
            guard var entry = state.entries[id], entry.request.redirectWillBeAnswered() else { return .leave }
            entry.lastActivity = DispatchTime.now().uptimeNanoseconds
            defer { state.entries[id] = entry }
            configuration.cookies?.take(from: response)
            switch entry.redirects.redirect(response, to: request) {
            case .follow(var next):
                if let jar = configuration.cookies, let target = next.url {
                    let merged = CookieList.merge(next.value(forHTTPHeaderField: "Cookie"), jar.header(for: target))
                    next.setValue(merged, forHTTPHeaderField: "Cookie")
                }
                entry.sentCredentials = next.value(forHTTPHeaderField: "Authorization") != nil
                return .follow(next)
            case .refuse(let error): return .refuse(.failed(error))
            }
        }
        switch decision {
        case .leave:
            return
        case .follow(let next):
            completionHandler(next)
        case .refuse(let end):
            // Not followed: the task ends by itself with the 3xx, which the closed entry ignores. It is not
            // cancelled (the redirect is in flight), so the handler is safe to call.
            close(taskIdentifier: id, with: end)
            completionHandler(nil)
        }
    }
}

extension SessionBridge {
    /// One request's phase, changed only by its `mutating` events, each of which says what the bridge must do.
    ///
    /// It holds the rule that once crashed the process: corelibs traps ("Received callback for HTTP redirection, but
    /// we're not waiting for it") when a task is cancelled after a redirect's completion handler was called and before
    /// the task's next event. A close in that window keeps its cancel until the redirect has settled.
    struct RequestState: Sendable {
        enum Phase: Sendable {
            /// Running; events go to the sink.
            case open
            /// Running; a redirect's completion handler was called and the task has produced no event since.
            case redirecting
            /// Closed with `end` at `closedAt` (uptime nanoseconds); its cancel waits for the redirect to settle
            /// when `cancelDeferred`; body bytes that still arrive go to the sink when `keepsData`.
            case closed(RequestEnd, closedAt: UInt64, cancelDeferred: Bool, keepsData: Bool)
        }

        private(set) var phase = Phase.open

        /// Whether the request still delivers events to its sink.
        var isOpen: Bool {
            if case .closed = phase { return false }
            return true
        }

        /// Whether body bytes still go to the sink: open, or closed with an end that keeps what still arrives
        /// (`TransferSink.keepsData(after:)`: bytes that reached the process are written, never fetched twice).
        var deliversData: Bool {
            if case .closed(_, _, _, let keepsData) = phase { return keepsData }
            return true
        }

        /// How the request ended, once closed: the caller gets it when the task completes.
        var pendingEnd: RequestEnd? {
            if case .closed(let end, _, _, _) = phase { return end }
            return nil
        }

        /// When the request was closed, once closed.
        var closedAt: UInt64? {
            if case .closed(_, let closedAt, _, _) = phase { return closedAt }
            return nil
        }

        /// Closes the request (the caller, a sink's verdict, the watchdog). Closing twice keeps the first end.
        /// - Parameters:
        ///   - end: how the request ended.
        ///   - now: the time, for the watchdog's grace period.
        ///   - keepingData: whether body bytes that still arrive go to the sink.
        /// - Returns: whether to cancel the task now (`false`: closed already, or the cancel waits for the redirect).
        mutating func close(with end: RequestEnd, now: UInt64, keepingData: Bool = false) -> Bool {
            switch phase {
            case .open:
                phase = .closed(end, closedAt: now, cancelDeferred: false, keepsData: keepingData)
                return true
            case .redirecting:
                phase = .closed(end, closedAt: now, cancelDeferred: true, keepsData: keepingData)
                return false
            case .closed:
                return false
            }
        }

        /// A redirect is about to be answered through its completion handler.
        /// - Returns: whether to answer it; `false` when closed (the cancel on its way ends the task; answering now
        ///   could reach the task after the cancel).
        mutating func redirectWillBeAnswered() -> Bool {
            guard isOpen else { return false }
            phase = .redirecting
            return true
        }

        /// The task produced an event (a response or its completion): a redirect before it has settled.
        /// - Returns: whether a deferred cancel is due now.
        mutating func taskProducedEvent() -> Bool {
            switch phase {
            case .redirecting:
                phase = .open
                return false
            case .closed(let end, let closedAt, cancelDeferred: true, let keepsData):
                phase = .closed(end, closedAt: closedAt, cancelDeferred: false, keepsData: keepsData)
                return true
            case .open, .closed:
                return false
            }
        }
    }
}
