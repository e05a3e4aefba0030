import Dispatch

/// Blocking file work — hashing a partial file again, syncing it, moving or copying a file — on a Dispatch thread,
/// never on one of the few cooperative threads that every task and the manager's actor share (two on two cores):
/// transfers that hashed their partial files there after `kill -9` once held the manager's first answer for 1–2 s.
enum Blocking {
    /// Runs `body` on a Dispatch thread.
    /// - Parameter body: the work; it may block.
    /// - Returns: what `body` returned.
    /// - Throws: what `body` threw.
    static func run<Value: Sendable, Failure: Error>(
        _ body: @escaping @Sendable () throws(Failure) -> Value
    ) async throws(Failure) -> Value {
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<Value, Failure>, Never>) in
            // A queue of its own, not a global one: a global queue runs at most about one item per core at once (on
            // Linux, more only once its monitor sees threads blocked, a second or more later), so a few slow bodies
            // (a sync, a hash of a large partial file) held every other transfer's restore before its first request
            // (the suite saw transfers with no request for 120 s). A new serial queue gets a thread of its own.
            DispatchQueue(label: "downloader.blocking", qos: .utility).async {
                continuation.resume(returning: Result { () throws(Failure) -> Value in try body() })
            }
        }
        return try result.get()
    }
}
