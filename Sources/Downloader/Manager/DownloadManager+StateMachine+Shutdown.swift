// The end of a manager's life in its state machine, and what it leaves for the next start: downloads stopped by the
// shutdown (or found waiting or running after a crash) are *interrupted*, which a caller's `suspend` never is.
extension DownloadManager.StateMachine {
    /// Whether `key` is suspended because its process stopped (a shutdown, a crash) rather than by `suspend`.
    func isInterrupted(_ key: Key) -> Bool {
        guard let entry = entries[key], !entry.isRemoved, entry.interrupted else { return false }
        switch entry.phase {
        case .suspended, .stopping(_, next: .suspend): return true
        default: return false
        }
    }

    /// Suspends everything, answers every waiter and starts nothing more; `.shutDownCompleted` follows once
    /// every transfer has ended.
    mutating func shutdown() -> [Action] {
        guard lifecycle == .running else { return [] }
        lifecycle = .shuttingDown
        var actions: [Action] = []
        for key in Array(entries.keys) {
            guard var entry = entries[key] else { continue }
            let verifying = entry.verifying.flatMap(\.waiters)
            entry.verifying = []
            if !verifying.isEmpty { actions.append(.fail(verifying, key, .shutDown)) }
            switch entry.phase {
            case .queued:
                queue.remove(key)
                entry.phase = .suspended
                entry.interrupted = true
                actions.append(.publish(key, .suspended))
            case .running(let generation):
                entry.phase = .stopping(generation, next: .suspend)
                entry.interrupted = true
                actions += [.cancel(key, generation), .publish(key, .suspended)]
            case .stopping(let generation, next: .resume):
                entry.phase = .stopping(generation, next: .suspend)
                entry.interrupted = true
                actions.append(.publish(key, .suspended))
            default:
                break
            }
            let waiters = entry.waiters.map(\.id)
            entry.waiters = []
            if !waiters.isEmpty { actions.append(.fail(waiters, key, .shutDown)) }
            entries[key] = entry
        }
        schedule(&actions)
        return actions
    }
}
