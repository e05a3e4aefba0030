/// The free slots of a batch (`DownloadManager.Batch`), as a value: one is spent for each request the driver reads,
/// and one comes back for each outcome the consumer takes.
///
/// A driver that waits for a slot is woken once `wakeAt` slots are free, not at each one. It then reads that many
/// requests in a row, so a long list wakes it once every `wakeAt` outcomes instead of once per outcome (issue #52).
/// The manager's queue does not run short meanwhile: `wakeAt` is at most an eighth of the limit, so while the driver
/// waits, more than seven eighths of the limit are read and not yet delivered.
struct BatchSlots: Sendable {
    /// What a driver's take found.
    enum Take: Equatable, Sendable {
        /// A slot is the driver's.
        case taken
        /// No slot is free: the driver waits until `give()` wakes it.
        case mustWait
        /// The batch is closed (its consumer left).
        case closed
    }

    /// The most requests read and not yet taken back as outcomes.
    let limit: Int
    /// How many free slots wake a waiting driver.
    let wakeAt: Int
    /// The free slots.
    private(set) var available: Int
    /// Whether the driver waits for a slot.
    private(set) var driverWaits = false
    /// Whether the consumer left.
    private(set) var isClosed = false

    /// - Parameter limit: the most requests in flight (at least 1).
    init(limit: Int) {
        self.limit = max(1, limit)
        wakeAt = max(1, min(64, self.limit / 8))
        available = self.limit
    }

    /// The driver asks for a slot.
    /// - Parameter waits: whether the driver waits when none is free (`false`: it only looks, and asks again).
    /// - Returns: what it found.
    mutating func take(waits: Bool) -> Take {
        if isClosed { return .closed }
        guard available > 0 else {
            if waits { driverWaits = true }
            return .mustWait
        }
        available -= 1
        return .taken
    }

    /// A slot comes back.
    /// - Returns: whether the waiting driver is woken now; it holds one of the free slots then.
    mutating func give() -> Bool {
        available += 1
        guard driverWaits, available >= wakeAt else { return false }
        driverWaits = false
        available -= 1
        return true
    }

    /// The consumer left: no slot is given out any more, and a waiting driver no longer waits (`Batch` wakes it, and
    /// tells it the batch is closed).
    mutating func close() {
        isClosed = true
        driverWaits = false
    }
}
