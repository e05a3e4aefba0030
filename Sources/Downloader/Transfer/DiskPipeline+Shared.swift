import Foundation

extension DiskPipeline {
    /// What the network side and both stages share: the pipeline's one lock-protected state.
    struct Shared: Sendable {
        /// The first write or checkpoint error. Commands after it are dropped (fences still open).
        var failure: DownloadError?
        /// Whether the partial file is given up (`abandon`): what still waits to be written, hashed or synced is
        /// dropped (fences still open).
        var abandoned = false
        /// Commands sent and not yet taken by the disk queue.
        var commands: [DiskCommand] = []
        /// Whether a drain of `commands` is scheduled on the disk queue.
        var scheduled = false
        /// Whether a drain is due shortly (`writeBatchDelay`) for writes that have not filled a batch yet.
        var timerArmed = false
        /// Bytes of the writes among `commands` and being written.
        var unwritten: Int64 = 0
        /// Bytes sent and not yet written and hashed (or handed over as a count): the memory the pipeline holds, and
        /// the most there ever were.
        var buffered: Int64 = 0
        var peakBuffered: Int64 = 0
        /// Bytes handed to the hasher in memory and not yet hashed.
        var hashBacklog: Int64 = 0
        /// Bytes the hasher was handed as a count to read back from the file, so far: it grows while hashing falls
        /// behind the network (see `WindowSizing`).
        var readBack: Int64 = 0
        /// Work for the hasher, in order, and whether a drain of it is scheduled on the hash queue (see `toHasher`).
        var hashWork: [@Sendable () -> Void] = []
        var hashScheduled = false
        /// Whether every stage is idle and `Transfer.run()` owns the pipeline (before the first command, and after
        /// `drained()` until the next command): it may then touch the stages' fields from anywhere (`QueueOwned`).
        var handedOver = true

        /// Queues written bytes: copied into the block of the last command when it is a write with room left, else
        /// into a new block. URLSession's chunk (16 KiB, allocated on its thread) is then freed at once instead of
        /// waiting for the disk on another thread: freed chunks spread over many malloc arenas kept 20 downloads at
        /// 157–171 MB, against 64–72 MB with one arena; blocks of a few hundred KiB are few and reused.
        /// - Parameters:
        ///   - data: the bytes.
        ///   - blockSize: the most bytes of one block (the first block of a transfer is smaller: small files).
        mutating func appendWrite(_ data: Data, blockSize: Int) {
            if case .write(var block)? = commands.last, block.count + data.count <= blockSize {
                commands.removeLast()  // `block` is now the only reference: the bytes are appended in place
                block.append(data)
                commands.append(.write(block))
                return
            }
            var block = Data(capacity: min(blockSize, max(64 << 10, 4 * data.count)))
            block.append(data)
            commands.append(.write(block))
        }

        /// Counts `count` more bytes held in memory (fewer when negative).
        mutating func changeBuffered(by count: Int64) {
            buffered += count
            peakBuffered = max(peakBuffered, buffered)
        }
    }
}
