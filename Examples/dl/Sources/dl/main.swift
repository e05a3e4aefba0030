// dl: a wget-like downloader built on the Downloader library.
import Downloader
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `dl --list`: what DIR's state records, read without the lock (a download another `dl` runs shows as
/// downloading once it has run a second) and without changing anything.
/// - Returns: 0.
func list(_ state: URL, directory: URL) -> Int32 {
    let (downloads, _) = DownloadManager.savedDownloads(in: state)
    var listing = ""
    for download in downloads {
        let total = download.totalBytes.map(String.init) ?? "?"
        listing += "\(download.state.rawValue)\t\(download.bytesOnDisk)/\(total)\t"
        listing += "\(Screen.safe(download.name))\t\(Screen.safe(download.url.redactedAbsoluteString))"
        if !download.resumable {
            listing += "\t(not resumable: the server sends it whole; a rerun fetches it again)"
        }
        if download.needsCredentials && download.state != .completed {
            listing += "\t(its credentials are not saved: a rerun gives them again)"
        }
        if download.state != .completed {
            // What holds for it until a rerun's command line says otherwise (the checksum stays unless contradicted).
            var holds: [String] = []
            if let rate = download.maximumBytesPerSecond { holds.append("--limit-rate \(Screen.bytes(Int64(rate)))/s") }
            if let connections = download.connections, connections > 1 { holds.append("-x \(connections)") }
            if let checksum = download.expectedChecksum { holds.append("--checksum \(checksum)") }
            if !holds.isEmpty { listing += "\t(\(holds.joined(separator: ", ")))" }
        }
        listing += "\n"
    }
    Console.output(listing)
    if !downloads.contains(where: { $0.state != .completed }) {
        Console.error(Screen.safe("dl: nothing unfinished in \(directory.path)") + "\n")
    }
    return 0
}

/// `dl -o NAME NEWURL` (or `-O FILE`) for a file partly downloaded from another URL — a signed link that expired —
/// or `dl NEWURL` for a link signed again (the same host and path, another query), continues that download from the
/// new URL (`DownloadManager.changeURL(of:to:)`): its bytes are kept when the server
/// proves the same file (validators and length, or the expected checksum), and no second entry is left behind.
/// - Returns: the earlier download's URL, which the run then asks for; `nil` when there is none.
func continuesUnderNewURL(
    _ request: Arguments.Request, _ arguments: Arguments, in directory: URL, manager: DownloadManager,
    renderer: ProgressRenderer
) async -> URL? {
    let earlier: DownloadReceipt
    if let file = downloadOptions(request, arguments, in: directory).destination {
        guard let found = await manager.unfinishedDownload(writingTo: file) else { return nil }
        earlier = found
    } else {
        // No -o: a link signed again (the same host and path, another query) names the same file.
        guard let found = await manager.unfinishedDownload(sameFileAs: request.url) else { return nil }
        earlier = found
    }
    guard earlier.url != request.url.withoutCredentials,
        (try? await manager.changeURL(of: earlier.url, to: request.url)) != nil
    else { return nil }
    let name = request.destination?.name ?? request.url.lastPathComponent
    renderer.printError(
        Screen.safe(
            "dl: \(name): continuing the partial file from \(earlier.url.redactedAbsoluteString) "
                + "with the new URL (kept only if the server proves it is the same file)"))
    return earlier.url
}

/// What the command line and the input file ask of one URL.
func downloadOptions(_ request: Arguments.Request, _ arguments: Arguments, in directory: URL) -> DownloadOptions {
    // dl's own `User-Agent` is the configuration's (`runDownloads`): a header given here, in any letter case, wins.
    // An input line's field replaces the command line's of the same name in any case.
    var headers = arguments.headers
    for (name, value) in request.headers { headers.setField(value, named: name) }
    let destination = request.destination.map { place in
        URL(fileURLWithPath: place.folder ?? directory.path, isDirectory: true)
            .appendingPathComponent(place.name).standardizedFileURL
    }
    var options = DownloadOptions(
        headers: headers,
        checksum: request.checksum ?? arguments.checksum ?? arguments.checksumFile?.checksum(for: request.url),
        naming: arguments.naming, computesChecksum: arguments.computesChecksum, destination: destination,
        maximumBytesPerSecond: arguments.limitRate, connections: arguments.connections, mirrors: request.mirrors)
    // The command line says all its tuning: a rerun without --limit-rate runs unlimited.
    options.replacesSavedTuning = true
    return options
}

/// Runs `dl` with parsed arguments.
/// - Returns: the exit status (0 all verified, 1 any failed).
func runDownloads(_ arguments: Arguments) async -> Int32 {
    let directory = arguments.downloadDirectory
    var configuration = DownloadManager.Configuration(directory: directory)
    configuration.completedDirectory = directory  // finished files land in DIR itself, like wget
    let state = arguments.stateDirectory
    configuration.stateDirectory = state
    configuration.removesStateWhenFinished = true  // a run that leaves nothing unfinished leaves only the files
    configuration.maximumActiveDownloads = arguments.maximumActive
    // Every request's agent unless a header names one. As a header of each download it was a second key beside a
    // caller's `user-agent`, and either could go out.
    configuration.userAgent = arguments.userAgent
    configuration.prioritization = arguments.lifo ? .lifo : .fifo
    configuration.retryLimit = arguments.retries
    configuration.stallTimeout = arguments.timeout
    configuration.lowestSpeedLimit = arguments.lowestSpeedLimit
    configuration.maximumBytesPerSecond = arguments.overallLimit
    configuration.credentials = arguments.credentials
    configuration.maximumConnectionsPerHost = arguments.connectionsPerHost
    configuration.fileAllocation = arguments.fileAllocation
    if ProcessInfo.processInfo.environment["DL_FIRST_REQUEST_CUT"] == "0" { configuration.asksWholeFirstWindow = false }
    let cookies: DownloadCookieJar
    do {
        cookies =
            try arguments.loadCookies.map { try DownloadCookieJar(contentsOf: URL(fileURLWithPath: $0)) }
            ?? DownloadCookieJar()
    } catch {
        Console.error(Screen.safe("dl: \((error as? DownloadError)?.reason ?? "\(error)")") + "\n")
        return 2
    }
    configuration.cookies = cookies
    let saveCookies: @Sendable () -> Void = {
        guard let path = arguments.saveCookies else { return }
        do throws(DownloadError) {
            try cookies.write(to: URL(fileURLWithPath: path))
        } catch {
            Console.error(Screen.safe("dl: \(error.reason)") + "\n")
        }
    }

    if arguments.output == "-" {
        return await StreamOutput.run(
            arguments, options: downloadOptions(arguments.requests[0], arguments, in: directory)
        ) { streaming in
            streaming.retryLimit = configuration.retryLimit
            streaming.stallTimeout = configuration.stallTimeout
            streaming.lowestSpeedLimit = configuration.lowestSpeedLimit
            streaming.maximumBytesPerSecond = configuration.maximumBytesPerSecond
            streaming.asksWholeFirstWindow = configuration.asksWholeFirstWindow
            streaming.credentials = configuration.credentials
        }
    }
    if arguments.list {
        return list(state, directory: directory)
    }
    let manager: DownloadManager
    do {
        do {
            manager = try DownloadManager(configuration: configuration)
        } catch let error as DownloadError where error == .directoryLocked && arguments.wait {
            if !arguments.quiet {
                Console.error("dl: another dl is using \(Screen.safe(directory.path)); waiting for it\n")
            }
            configuration.directoryLockTimeout = .infinity
            manager = try DownloadManager(configuration: configuration)
        }
    } catch let error as DownloadError where error == .directoryLocked {
        Console.error("dl: another dl is using \(Screen.safe(directory.path)) (--wait waits for it)\n")
        return 1
    } catch {
        Console.error(Screen.safe("dl: \(directory.path): \((error as? DownloadError)?.reason ?? "\(error)")") + "\n")
        return 1
    }
    if let recovery = manager.receiptsRecoveryError, !arguments.quiet {
        Console.error(Screen.safe("dl: warning: \(recovery.reason)") + "\n")
    }

    let resultLog: ResultLog?
    do {
        resultLog = try arguments.resultLog.map { path throws(UsageError) in try ResultLog(path: path) }
    } catch {
        Console.error(Screen.safe("dl: \(error.message)") + "\n")
        return 2
    }
    let renderer = ProgressRenderer(
        mode: arguments.quiet ? .quiet : (isatty(STDERR_FILENO) == 1 ? .terminal : .plain))
    // Ctrl-C, SIGTERM and SIGHUP: suspend everything, save the state, then exit 130 / 143 / 129. A second signal exits
    // at once.
    let signals = SignalHandler(
        manager: manager, renderer: renderer, directory: directory, state: state,
        stopDeadline: SignalHandler.stopDeadline(environment: ProcessInfo.processInfo.environment),
        onStop: {
            saveCookies()
            resultLog?.finish()
        })
    signals.install()
    renderer.redrawOnResize()

    // Subscribed before anything is queued, so no state change is missed. Quiet, only what it shows: warnings and a
    // failed save (each state change and progress report of every file cost a list a few percent of its CPU).
    let stream =
        arguments.quiet
        ? await manager.events(of: [.warning, .receiptsSaveFailed]) : await manager.events()
    let events = Task {
        for await event in stream { renderer.handle(event) }
    }

    // The command line's URLs in their order, then the input file's as the batch asks for them.
    var named = arguments.requests
    if named.count == 1, arguments.input == nil,
        let earlier = await continuesUnderNewURL(
            named[0], arguments, in: directory, manager: manager, renderer: renderer)
    {
        named[0].url = earlier  // the download the partial file belongs to, now fetched from the new URL
    }
    let commandLine = named.map { request in
        let options = downloadOptions(request, arguments, in: directory)
        if let chosen = options.destination { renderer.setName(chosen.lastPathComponent, of: request.url) }
        return DownloadRequest(request.url, options: options)
    }
    let listed = arguments.input.map { input in
        let settings = arguments
        return input.requests { entry throws(UsageError) in
            let request = try Arguments.request(for: entry)
            if let list = settings.checksumFile, !settings.checksumOptional {
                try Arguments.requireChecksum(of: request, in: list)
            }
            let options = downloadOptions(request, settings, in: directory)
            if let chosen = options.destination { renderer.setName(chosen.lastPathComponent, of: request.url) }
            return DownloadRequest(request.url, options: options)
        }
    }
    let hook = arguments.onComplete.map { command in
        CompletionHook(command: command) { message in renderer.printError(message) }
    }
    var failures = 0
    // Without an input file every URL is known at once: the batch line shows the total from the start.
    renderer.listed(commandLine.count, ended: listed == nil)
    let requests = ListedRequests(first: commandLine, then: listed) { count, ended in
        renderer.listed(count, ended: ended)
    }
    let inFlight = ProcessInfo.processInfo.environment["DL_IN_FLIGHT"].flatMap { Int($0) }.map { max(1, $0) }
    for await outcome in manager.download(requests, maximumInFlight: inFlight) {
        let url = outcome.request.url
        renderer.forgetName(of: url)
        switch outcome.result {
        case .success(let receipt):
            renderer.printResult(receipt.fileURL.path)
            resultLog?.record(url: url, receipt: receipt)
            await hook?.run(path: receipt.fileURL.path, url: url, checksum: receipt.checksum?.description)
        case .failure(let error):
            guard !signals.isStopping else { continue }
            failures += 1
            resultLog?.record(url: url, error: error)
            renderer.printFailure("dl: \(url.redactedAbsoluteString): \(error.dlReason)")
        }
    }
    if signals.isStopping { await signals.waitForever() }
    arguments.input?.forgetPosition()  // only a signal or a kill leaves the list's position for the next run
    await hook?.finish()
    await manager.shutdown()
    saveCookies()
    resultLog?.finish()
    await events.value  // shutdown ends the stream once every event is delivered
    renderer.finish(failures: failures)
    if let bad = arguments.input?.failure.withLock({ $0 }) {
        Console.error(Screen.safe("dl: \(bad.message)") + " (the URLs after it were not read)\n")
        return 2
    }
    return failures > 0 ? 1 : 0
}

// A closed stdout (`dl … | head`) is an error to handle, not a signal that kills the downloads.
Console.ignoreBrokenPipes()
let arguments: Arguments
do {
    arguments = try Arguments.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    Console.error(
        Screen.safe("dl: \(error.message)") + "\nusage: dl [OPTION]... URL...  (dl --help lists every option)\n")
    exit(2)
}
// Before any thread but this one allocates: a thread keeps the malloc arena it first got.
MallocArenas.apply(MallocArenas.limit(for: arguments, environment: ProcessInfo.processInfo.environment))
// Passwords and secret headers leave the process list (`/proc/PID/cmdline`), as curl does.
Secrets.blankCommandLine()
if arguments.help {
    Console.output(Arguments.usage + "\n")
    exit(0)
}
if arguments.showVersion {
    Console.output("dl \(Arguments.version) (Downloader: resumable, verified downloads; MD5, SHA-1, SHA-256)\n")
    exit(0)
}
let status = await runDownloads(arguments)
fflush(nil)
// _exit, not exit: the session's worker threads may still be winding down, and exit's static destructors must not
// run under them.
_exit(status)
