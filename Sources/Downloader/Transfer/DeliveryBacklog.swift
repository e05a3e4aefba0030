/// The body bytes URLSession holds for the session's delegate queue and has not delivered yet, while one request alone
/// has a body coming: an estimate, refreshed from the queue's length every `sampleInterval` bytes delivered. A value,
/// tested without a session.
///
/// On Linux, libcurl's thread reads a response as fast as the socket gives it and queues every chunk as an operation on
/// the delegate queue (swift-corelibs-foundation cannot pause a response). When the delegate queue's thread is starved
/// of CPU, those chunks wait in memory before any sink sees them: with both cores busy, a fast body that cannot be
/// resumed took `dl` to 97–172 MB while its sink counted at most its 24 MiB. A sink adds this estimate to the bytes
/// that wait for its disk, so that the bound of a whole body (`Transfer.StateMachine.WindowEndRule`) holds for both.
///
/// Counting the queue walks its list under its lock (`OperationQueue.operationCount`), so it is done once per MiB
/// delivered, not for every chunk; between counts the estimate goes down by what was delivered since (a lower bound:
/// libcurl may have added more). Which request a queued chunk belongs to cannot be seen, and shares of the recent
/// deliveries proved a poor guess (the queue is what arrived *since*: a paced body was once charged 28 MB of two fast
/// ones' chunks), so the queue is charged to a request only while no other request of the session has a body coming.
/// With several, each one's own bound (windows) is what holds.
struct DeliveryBacklog: Sendable {
    /// Bytes delivered between two counts of the queue.
    static let sampleInterval = 1 << 20

    /// The request the last count charged, and the bytes it charged.
    private var charged: (request: Int, bytes: Int)?
    /// Bytes and chunks delivered since the last count, and bytes delivered to the charged request.
    private var bytesSinceCount = 0
    private var chunksSinceCount = 0
    private var chargedBytesSinceCount = 0

    /// Bytes probably queued for `request` behind the chunk being delivered.
    func estimate(for request: Int) -> Int {
        guard let charged, charged.request == request else { return 0 }
        return max(0, charged.bytes - chargedBytesSinceCount)
    }

    /// A chunk of `count` bytes is being delivered to `request`.
    /// - Returns: whether the queue is to be counted now (then call `counted(operations:alone:)`).
    mutating func delivering(_ count: Int, to request: Int) -> Bool {
        bytesSinceCount += count
        chunksSinceCount += 1
        if charged?.request == request { chargedBytesSinceCount += count }
        return bytesSinceCount >= Self.sampleInterval
    }

    /// The delegate queue holds `operations` operations, the one running included.
    /// - Parameter alone: the one request of the session with a body coming, if only one has.
    mutating func counted(operations: Int, alone: Int?) {
        let chunkSize = chunksSinceCount > 0 ? max(1, bytesSinceCount / chunksSinceCount) : 16 << 10
        charged = alone.map { ($0, max(0, operations - 1) * chunkSize) }
        bytesSinceCount = 0
        chunksSinceCount = 0
        chargedBytesSinceCount = 0
    }
}
