import Dispatch
import Foundation

/// Where a small fresh file's last steps run (issue #52): on the cooperative thread of its transfer's task, or on a
/// `Blocking` thread.
///
/// The last steps of a small file (create, write, record, place: a few file-system calls, tens of microseconds on a
/// local disk) cost more in the two thread hand-offs of a `Blocking` hop than in themselves: measured on a list of
/// 20,000 files of 1 KiB, 0.05 ms of CPU a file (about a fifth of what the library adds to URLSession's own cost)
/// and 3–5 thread wake-ups. File work stays off the cooperative threads for what it can cost a slow disk, though:
/// those threads are as many as the cores (two here) and carry every task and the manager's actor. So a finish runs
/// inline only within these bounds:
/// - one at a time in the process: a disk that stalls holds at most one cooperative thread, and only on a machine
///   with two cores or more (with one, every finish hops);
/// - a body of at most `largestBody` bytes (64 KiB);
/// - not while the disk is slow: a finish, inline or not, that took longer than `slowFinish` (20 ms) sends every
///   finish to a `Blocking` thread for the next `cooldown` (1 s). (Not 2 ms: on a busy machine a thread that loses
///   its core mid-finish takes that long, and a list of 20,000 files then ran 83 % of its finishes on `Blocking`
///   threads.)
///
/// A value type: its events return the decision, tested without a disk (`InlineFinishRuleTests`).
struct InlineFinishRule: Sendable, Equatable {
    /// How a finish runs.
    enum Decision: Sendable, Equatable {
        /// On the calling thread; `finished(inline: true, …)` must follow.
        case inline
        /// On a `Blocking` thread.
        case hop
    }

    /// The cores of the machine: with fewer than two, every finish hops.
    let cores: Int
    /// The longest body finished inline.
    let largestBody: Int
    /// A finish longer than this (nanoseconds) marks the disk slow.
    let slowFinish: UInt64
    /// How long (nanoseconds) a slow finish keeps every finish off the cooperative threads.
    let cooldown: UInt64
    /// Whether an inline finish is running.
    private(set) var isRunningInline = false
    /// Until when (uptime nanoseconds) every finish hops.
    private(set) var hopsUntil: UInt64 = 0
    /// The finishes run inline and hopped so far.
    private(set) var inlineCount = 0
    private(set) var hopCount = 0

    /// - Parameters:
    ///   - cores: the machine's active cores.
    ///   - largestBody: the longest body finished inline.
    ///   - slowFinish: a finish longer than this (nanoseconds) marks the disk slow.
    ///   - cooldown: how long (nanoseconds) every finish hops after a slow one.
    init(
        cores: Int, largestBody: Int = 64 << 10, slowFinish: UInt64 = 20_000_000, cooldown: UInt64 = 1_000_000_000
    ) {
        self.cores = cores
        self.largestBody = largestBody
        self.slowFinish = slowFinish
        self.cooldown = cooldown
    }

    /// A finish of `bodyCount` bytes is about to run.
    /// - Parameters:
    ///   - bodyCount: the bytes it writes.
    ///   - now: uptime nanoseconds.
    /// - Returns: where it runs.
    mutating func start(bodyCount: Int, now: UInt64) -> Decision {
        guard cores >= 2, bodyCount <= largestBody, !isRunningInline, now >= hopsUntil else {
            hopCount += 1
            return .hop
        }
        isRunningInline = true
        inlineCount += 1
        return .inline
    }

    /// A finish ended (it may have thrown).
    /// - Parameters:
    ///   - inline: whether it ran inline (`start` said so).
    ///   - duration: how long its file work took (nanoseconds).
    ///   - now: uptime nanoseconds.
    mutating func finished(inline: Bool, duration: UInt64, now: UInt64) {
        if inline { isRunningInline = false }
        if duration > slowFinish { hopsUntil = max(hopsUntil, now &+ cooldown) }
    }
}

/// The process's `InlineFinishRule` behind a lock: every transfer of every manager shares it, since they share the
/// cooperative threads. Tests give a transfer one of its own (`Transfer.Configuration.finishes`).
final class InlineFinishes: Sendable, Equatable {
    /// The one every manager's transfers use.
    static let shared = InlineFinishes(
        InlineFinishRule(cores: ProcessInfo.processInfo.activeProcessorCount))

    private let rule: Locked<InlineFinishRule>

    /// - Parameter rule: the rule, in its initial state.
    init(_ rule: InlineFinishRule) {
        self.rule = Locked(rule)
    }

    /// The rule's state now (for tests).
    var state: InlineFinishRule { rule.withLock { $0 } }

    /// Runs a finish of `bodyCount` bytes where the rule says: here, or on a `Blocking` thread.
    /// - Parameters:
    ///   - bodyCount: the bytes it writes.
    ///   - body: the finish; it may block on the disk.
    /// - Returns: what `body` returned.
    /// - Throws: what `body` threw.
    func run<Value: Sendable>(
        bodyCount: Int, _ body: @escaping @Sendable () throws(DownloadError) -> Value
    ) async throws(DownloadError) -> Value {
        let decision = rule.withLock { $0.start(bodyCount: bodyCount, now: DispatchTime.now().uptimeNanoseconds) }
        switch decision {
        case .inline:
            return try timed(inline: true, body)
        case .hop:
            return try await Blocking.run { () throws(DownloadError) -> Value in try self.timed(inline: false, body) }
        }
    }

    /// Runs `body` here and tells the rule how long it took.
    private func timed<Value>(
        inline: Bool, _ body: () throws(DownloadError) -> Value
    ) throws(DownloadError) -> Value {
        let start = DispatchTime.now().uptimeNanoseconds
        defer {
            let now = DispatchTime.now().uptimeNanoseconds
            rule.withLock { $0.finished(inline: inline, duration: now &- start, now: now) }
        }
        return try body()
    }

    static func == (lhs: InlineFinishes, rhs: InlineFinishes) -> Bool { lhs === rhs }
}
