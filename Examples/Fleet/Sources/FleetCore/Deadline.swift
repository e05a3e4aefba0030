import Synchronization

/// A call that did not answer within its deadline (see `answered(within:_:)`).
public struct Unanswered: Error {
    public let seconds: Double
}

/// Runs `operation` and returns its result, or throws `Unanswered` once `seconds` pass first. The operation is then
/// cancelled and left to end on its own: a call stuck in a wedged connection pool never holds its caller.
/// - Throws: the operation's error, or `Unanswered`.
public func answered<T: Sendable>(
    within seconds: Double, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let waiting = Answer<T>()
    return try await withCheckedThrowingContinuation { continuation in
        waiting.set(continuation)
        let work = Task {
            let result: Result<T, any Error>
            do { result = .success(try await operation()) } catch { result = .failure(error) }
            waiting.take()?.resume(with: result)
        }
        Task {
            try? await Task.sleep(for: .seconds(seconds))
            guard let continuation = waiting.take() else { return }
            work.cancel()
            continuation.resume(throwing: Unanswered(seconds: seconds))
        }
    }
}

/// Who waits for an `answered(within:_:)` call: resumed once, by the call or by its deadline.
private final class Answer<T: Sendable>: Sendable {
    private let waiting = Mutex<CheckedContinuation<T, any Error>?>(nil)

    func set(_ continuation: CheckedContinuation<T, any Error>) {
        waiting.withLock { $0 = continuation }
    }

    func take() -> CheckedContinuation<T, any Error>? {
        waiting.withLock { $0.take() }
    }
}
