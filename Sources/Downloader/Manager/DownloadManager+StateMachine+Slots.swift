extension DownloadManager.StateMachine {
    /// The manager's slots: how many transfers may run at once, how many hold one, the downloads waiting for one,
    /// and the numbers of transfer generations. Part of the machine's state, changed only through these methods.
    struct Slots {
        private var queue: WaitingQueue<Key>
        /// How many slots may be in use.
        private(set) var limit: Int
        /// Slots held by running and stopping transfers.
        private(set) var inUse = 0
        private var lastGeneration: Generation = 0

        init(limit: Int, prioritization: DownloadPrioritization) {
            self.limit = max(1, limit)
            queue = WaitingQueue(prioritization: prioritization)
        }

        /// Changes how many slots may be in use (at least one).
        mutating func setLimit(_ newLimit: Int) {
            limit = max(1, newLimit)
        }

        /// Queues `key` for a slot (again, if it waits already: it takes a new place).
        mutating func enqueue(_ key: Key, priority: Int) {
            queue.push(key, priority: priority)
        }

        /// Queues `key` before the downloads of its priority that wait (one that had started and waited out a
        /// `Retry-After`).
        mutating func enqueueFirst(_ key: Key, priority: Int) {
            queue.pushFirst(key, priority: priority)
        }

        /// Takes `key` out of the queue, if it waits.
        mutating func dequeue(_ key: Key) {
            queue.remove(key)
        }

        /// The download that starts next, when a slot is free.
        mutating func nextWaiting() -> Key? {
            inUse < limit ? queue.popFirst() : nil
        }

        /// Takes a slot for a new transfer generation.
        /// - Returns: the generation's number.
        mutating func take() -> Generation {
            inUse += 1
            lastGeneration += 1
            return lastGeneration
        }

        /// A transfer ended: its slot is free.
        mutating func release() {
            inUse -= 1
        }
    }
}
