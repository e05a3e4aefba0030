/// The downloads waiting for a slot, in the order they start: higher priority first, then FIFO or LIFO.
///
/// A binary heap with lazy removal: `push` is O(log n); `remove` only forgets the ticket, in O(1), and `popFirst`
/// skips forgotten tickets, so suspending or resuming thousands of waiting downloads costs O(log n) each instead of a
/// scan of the whole queue. Forgotten entries are purged when they outnumber the live ones.
struct WaitingQueue<Key: Hashable> {
    /// One place in the queue; a download that is queued again gets a new ticket.
    typealias Ticket = Int

    private struct Item {
        let key: Key
        let priority: Int
        let ticket: Ticket
    }

    let prioritization: DownloadPrioritization
    private var heap: [Item] = []
    /// The live ticket of each waiting key.
    private var live: [Key: Ticket] = [:]
    private var nextTicket: Ticket = 0
    /// Tickets of `pushFirst` under FIFO: below every ticket of `push`.
    private var nextFrontTicket: Ticket = 0

    init(prioritization: DownloadPrioritization) {
        self.prioritization = prioritization
    }

    /// How many downloads wait.
    var count: Int { live.count }

    var isEmpty: Bool { live.isEmpty }

    /// Whether `key` waits.
    func contains(_ key: Key) -> Bool { live[key] != nil }

    /// Queues `key` (again, if it was queued already: its old place is given up).
    /// - Parameters:
    ///   - key: the download.
    ///   - priority: higher starts first; ties follow the prioritization.
    mutating func push(_ key: Key, priority: Int) {
        nextTicket += 1
        live[key] = nextTicket
        heap.append(Item(key: key, priority: priority, ticket: nextTicket))
        siftUp(heap.count - 1)
        purgeIfMostlyStale()
    }

    /// Queues `key` before every download of its priority that waits (again, if it was queued already).
    mutating func pushFirst(_ key: Key, priority: Int) {
        guard prioritization == .fifo else { return push(key, priority: priority) }  // LIFO: the newest goes first
        nextFrontTicket -= 1
        live[key] = nextFrontTicket
        heap.append(Item(key: key, priority: priority, ticket: nextFrontTicket))
        siftUp(heap.count - 1)
        purgeIfMostlyStale()
    }

    /// Takes `key` out of the queue, if it is there.
    mutating func remove(_ key: Key) {
        live[key] = nil
        purgeIfMostlyStale()
    }

    /// Takes the download that starts next.
    mutating func popFirst() -> Key? {
        while let top = heap.first {
            removeTop()
            if live[top.key] == top.ticket {
                live[top.key] = nil
                return top.key
            }
        }
        return nil
    }

    // MARK: - Heap

    /// Whether `a` starts before `b`.
    private func precedes(_ a: Item, _ b: Item) -> Bool {
        if a.priority != b.priority { return a.priority > b.priority }
        switch prioritization {
        case .fifo: return a.ticket < b.ticket
        case .lifo: return a.ticket > b.ticket
        }
    }

    private mutating func removeTop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        siftDown(0)
    }

    private mutating func siftUp(_ index: Int) {
        var child = index
        while child > 0 {
            let parent = (child - 1) / 2
            guard precedes(heap[child], heap[parent]) else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ index: Int) {
        var parent = index
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var best = parent
            if left < heap.count && precedes(heap[left], heap[best]) { best = left }
            if right < heap.count && precedes(heap[right], heap[best]) { best = right }
            guard best != parent else { return }
            heap.swapAt(parent, best)
            parent = best
        }
    }

    /// Rebuilds the heap from the live tickets when stale items are more than half of it (amortised O(1) per
    /// removal).
    private mutating func purgeIfMostlyStale() {
        guard heap.count > 64, heap.count > 2 * live.count else { return }
        heap.removeAll { live[$0.key] != $0.ticket }
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }
}

/// The order in which waiting downloads start.
public enum DownloadPrioritization: Sendable, Hashable {
    /// First queued, first started.
    case fifo
    /// Last queued, first started.
    case lifo
}

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
