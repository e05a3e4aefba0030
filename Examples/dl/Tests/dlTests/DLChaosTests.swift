import Downloader
import Foundation
import HTTPTestServer
import Testing

@testable import dl

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The chaos run (issue #33): seeded random server behaviours × `-x 1`/`-x 4` × a random signal (SIGINT, SIGTERM,
/// SIGHUP, SIGKILL) at a random moment × a rerun, against the invariants every trial must keep:
/// - a catchable signal ends `dl` within 5 s with its documented code (130, 143, 129; 137 for SIGKILL);
/// - exit 0 only with the right file (its MD5 is the server's content), and no wrong file is ever printed;
/// - peak RSS at most 96 MB;
/// - the rerun finishes with the right digest;
/// - for a body with ranges, the rerun fetches only what the first run did not keep: at most the rest of the file
///   beyond the partial file, plus a window per connection after `SIGKILL` (bytes written but not yet counted by a
///   saved state), plus 5 %. (What the server had pushed into the socket and the killed process never read is not
///   counted against it: on loopback that is up to 36 MiB per connection, the kernel's buffers.)
///
/// CI runs `DL_CHAOS_TRIALS` trials (default 24) from `DL_CHAOS_SEED` (default 1) against the release `dl`;
/// `Tests/Reliability/chaos.sh N SEED` runs more by hand, and a failing trial prints the seed and index to replay
/// (`DL_CHAOS_ONLY=INDEX`; `DL_CHAOS_BEHAVIOUR=flappingETag` gives every trial one server behaviour; `DL_CHAOS_KEEP=PATH` keeps a copy of the directory before the rerun at PATH, and after it at
/// PATH.after).
@Suite("dl chaos")
final class DLChaosTests: Sendable {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var work: URL { workspace.directory }

    init() throws {
        workspace = try TestWorkspace(prefix: "dl-chaos")
    }

    static let environment = ProcessInfo.processInfo.environment
    static let trials = environment["DL_CHAOS_TRIALS"].flatMap(Int.init) ?? 24
    static let seed = environment["DL_CHAOS_SEED"].flatMap(UInt64.init) ?? 1
    static let only = environment["DL_CHAOS_ONLY"].flatMap(Int.init)
    /// `DL_CHAOS_BEHAVIOUR=NAME` gives every trial that server behaviour (the other draws stay the seed's).
    static let onlyBehaviour = environment["DL_CHAOS_BEHAVIOUR"].flatMap(Behaviour.init(rawValue:))

    /// How the server answers, as test-server options (`Tests/HTTPTestServer/README.md`).
    enum Behaviour: String, CaseIterable {
        case plain, noLength, endless, slow, bursty, drop, flaky, range416, flappingETag, gzip
        /// An endless body as fast as the socket takes it (issue #48: a signal took up to 115 s to end such a run).
        case fastEndless

        /// The query options; `ranged`: later requests can continue by Range (the 1.05 bound applies).
        var options: (query: String, ranged: Bool) {
            switch self {
            case .plain: ("", true)
            case .noLength: ("&length=none&norange=1", false)
            case .endless: ("&length=none&norange=1", false)
            case .fastEndless: ("&length=none&norange=1&fast=1", false)
            case .slow: ("&rate=20000000", true)
            case .bursty: ("&stallAfter=\(3 << 20)&stall=0.3&stallCount=3&stallReached=1", true)
            case .drop: ("&dropAt=\(5 << 20)&dropCount=2", true)
            case .flaky: ("&status=503&statusCount=2&retryAfter=0", true)
            case .range416: ("&range416=1", false)
            case .flappingETag: ("&etag=flap", true)
            case .gzip: ("&gzip=1", false)
            }
        }
    }

    struct Trial: CustomStringConvertible {
        let index: Int
        let behaviour: Behaviour
        let size: Int
        let connections: Int
        let signal: Int32
        /// Body bytes the server sends before the signal.
        let after: Int64

        var description: String {
            "trial \(index): \(behaviour) \(size >> 20) MiB -x \(connections), signal \(signal) after \(after) bytes"
        }
    }

    static func trials(seed: UInt64, count: Int, behaviour forced: Behaviour? = onlyBehaviour) -> [Trial] {
        var random = SeededGenerator(seed: seed)
        return (0..<count).map { index in
            let drawn = Behaviour.allCases.randomElement(using: &random)!
            let behaviour = forced ?? drawn
            let endless = behaviour == .endless || behaviour == .fastEndless
            let size = endless ? 1 << 40 : [3 << 20, 24 << 20, 96 << 20].randomElement(using: &random)!
            let limit = endless ? Int64(behaviour == .fastEndless ? 1 << 30 : 400 << 20) : Int64(size)
            return Trial(
                index: index, behaviour: behaviour, size: size, connections: Bool.random(using: &random) ? 1 : 4,
                signal: [SIGINT, SIGTERM, SIGHUP, SIGKILL].randomElement(using: &random)!,
                after: Int64.random(in: 0...limit, using: &random))
        }
    }

    /// Against the release `dl` (`DL_BINARY`, as CI's release stage sets it), or when trials are asked for: a debug
    /// build hashes and writes several times slower than the product, which is not what these invariants are about.
    static let enabled = environment["DL_BINARY"] != nil || environment["DL_CHAOS_TRIALS"] != nil

    @Test("Seeded random servers, signals and reruns keep every invariant", .enabled(if: enabled))
    func chaos() async throws {
        var problems: [String] = []
        for trial in Self.trials(seed: Self.seed, count: Self.trials) where Self.only.map({ $0 == trial.index }) ?? true
        {
            let started = ContinuousClock.now
            let found = try await run(trial)
            problems += found.map { "\(trial) — \($0)" }
            print(
                "chaos \(trial): \(found.isEmpty ? "ok" : "\(found.count) problems") in \(ContinuousClock.now - started)"
            )
        }
        let replay = "replay: DL_CHAOS_SEED=\(Self.seed) DL_CHAOS_ONLY=INDEX swift test --filter DLChaosTests"
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))\n\(replay)")
        print("chaos: \(Self.trials) trials from seed \(Self.seed), \(problems.count) problems")
    }

    /// Runs one trial and returns what broke.
    func run(_ trial: Trial) async throws -> [String] {
        var problems: [String] = []
        let name = "c\(Self.seed)-\(trial.index)"
        let url = server.url("/bytes/\(name)?size=\(trial.size)\(trial.behaviour.options.query)")
        let dir = work.appendingPathComponent(name)
        let content = TestContent(name: name, size: trial.size)
        let arguments = ["-q", "-x", String(trial.connections), "--dir", dir.path, url.absoluteString]
        let sentBefore = server.statistics.bodyBytesSent
        let first = try DLProcess(arguments, in: work)
        let peak = PeakMemory(pid: first.pid)
        let target = sentBefore + trial.after
        let signalled = Locked<ContinuousClock.Instant?>(nil)
        // A condition is looked at on the server's events; a dl that ended before the target (the disk fell behind a
        // fast body) makes none, so the wait is one of a second at a time, up to a minute, until dl has ended.
        var sent = false
        for _ in 0..<60 where !sent && first.isRunning {
            sent = await server.waitUntil(timeout: .seconds(1)) { [signal = trial.signal] in
                guard first.isRunning else { return true }
                guard $0.bodyBytesSent >= target else { return false }
                signalled.withLock { $0 = .now }
                first.send(signal)
                return true
            }
        }
        // It may have finished (or failed) before the target: then it is not signalled (its pid may be another
        // process's by now).
        if !sent && first.isRunning {
            signalled.withLock { $0 = .now }
            first.send(trial.signal)
        }
        let outcome = await first.wait()
        let firstPeak = peak.stop()
        // The exit as its reaping thread saw it: the test's own scheduling (a loaded suite) does not count.
        if let at = signalled.withLock({ $0 }), outcome.status == 128 + trial.signal,
            let exit = first.exitInstant, exit - at > .seconds(5)
        {
            problems.append("exited \(exit - at) after the signal")
        }
        if firstPeak > 96 << 20 { problems.append("peak RSS \(firstPeak >> 20) MB") }
        let expected = [0, 1, 128 + trial.signal]
        if !expected.contains(outcome.status) {
            problems.append("exit \(outcome.status): \(outcome.stderr.suffix(300))")
        }
        problems += wrongFiles(outcome, content: content, run: "first")
        // An endless body has no end to reach: the trial is the signal and its exit.
        guard trial.behaviour != .endless && trial.behaviour != .fastEndless else { return problems }

        let kept = Self.partialBytes(in: dir)
        if let keep = Self.environment["DL_CHAOS_KEEP"] {
            try? FileManager.default.copyItem(at: dir, to: URL(fileURLWithPath: keep))
        }
        let sentBeforeRerun = server.statistics.bodyBytesSent
        let rerun = try DLProcess(arguments, in: work)
        let rerunPeak = PeakMemory(pid: rerun.pid)
        let second = await rerun.wait()
        if rerunPeak.stop() > 96 << 20 { problems.append("rerun peak RSS \(rerunPeak.stop() >> 20) MB") }
        // A server that sends the whole file in one response cannot be paced: when the disk falls behind past the
        // documented limit the download stops with that clear error rather than hold the file in memory (seen in CI,
        // beside the demo's 212 MiB, on a 96 MiB body). Accepted for those servers only, and said.
        let diskBehind =
            !trial.behaviour.options.ranged && second.status == 1 && second.stderr.contains("the disk fell")
        if diskBehind { print("chaos \(trial): the rerun stopped as documented: the disk fell behind a whole body") }
        if second.status != 0 && !diskBehind {
            problems.append("rerun exit \(second.status): \(second.stderr.suffix(300))")
        }
        problems += wrongFiles(second, content: content, run: "rerun")
        if second.status == 0 && second.lines.count != 1 { problems.append("rerun printed \(second.lines)") }
        let served = server.statistics.bodyBytesSent - sentBeforeRerun
        let window = Int64(4 << 20) * Int64(trial.connections)
        let allowed = Int64(trial.size) - kept + (trial.signal == SIGKILL ? window : 0) + Int64(trial.size) / 20
        if trial.behaviour.options.ranged && outcome.status != 0 && served > allowed {
            problems.append("the rerun fetched \(served) bytes, the first run kept \(kept) of \(trial.size)")
        }
        if let keep = Self.environment["DL_CHAOS_KEEP"] {
            try? FileManager.default.copyItem(at: dir, to: URL(fileURLWithPath: keep + ".after"))
        }
        try? FileManager.default.removeItem(at: dir)
        return problems
    }

    /// The bytes a run left that its saved states count (the hashed prefix and the segments written after it): what a
    /// rerun may keep. A partial file without a state counts nothing (its bytes cannot be trusted).
    static func partialBytes(in dir: URL) -> Int64 {
        let partial = dir.appendingPathComponent(".dl/partial")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: partial.path)) ?? []
        return names.filter { $0.hasSuffix(".state") }.reduce(0) { total, name in
            guard let data = try? Data(contentsOf: partial.appendingPathComponent(name)),
                let envelope = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                let state = envelope["state"] as? [String: Any]
            else { return total }
            let hashed = (state["hashedLength"] as? NSNumber)?.int64Value ?? 0
            let segments = (state["segments"] as? [[NSNumber]] ?? []).reduce(Int64(0)) {
                $0 + ($1.count == 2 ? $1[1].int64Value - $1[0].int64Value : 0)
            }
            return total + hashed + segments
        }
    }

    /// Every path printed is the right file.
    func wrongFiles(_ outcome: DLProcess.Outcome, content: TestContent, run: String) -> [String] {
        outcome.lines.compactMap { path in
            guard let data = try? Data(contentsOf: URL(fileURLWithPath: path)) else {
                return "\(run) printed \(path), unreadable"
            }
            return MD5.hash(data: data) == content.md5
                ? nil : "\(run) printed \(path) with other bytes (exit \(outcome.status))"
        }
    }
}

/// Samples a process's peak resident memory (`VmHWM`, which only grows) until stopped. Linux only (`/proc`):
/// elsewhere the peak stays 0 and the chaos run does not check memory.
final class PeakMemory: Sendable {
    private let peak = Locked<Int64>(0)
    private let done = Locked(false)

    init(pid: Int32) {
        let peak = self.peak
        let done = self.done
        #if os(Linux)
            let path = "/proc/\(pid)/status"
        #else
            done.withLock { $0 = true }
            let path = ""
        #endif
        Thread {
            while !done.withLock({ $0 }) {
                if let text = try? String(contentsOfFile: path, encoding: .utf8),
                    let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
                    let kb = Int64(line.split(separator: " ").dropFirst().first ?? "")
                {
                    peak.withLock { $0 = max($0, kb << 10) }
                }
                usleep(10_000)  // a sample every 10 ms; VmHWM is itself the peak, so only the last moments are missed
            }
        }.start()
    }

    /// Stops sampling; the peak seen, in bytes.
    @discardableResult
    func stop() -> Int64 {
        done.withLock { $0 = true }
        return peak.withLock { $0 }
    }
}
