import Foundation

extension DiskPipeline {
    /// What the network side and both stages share: the pipeline's one lock-protected state.
    struct Shared: Sendable {
        /// The first write or checkpoint error. Commands after it are dropped (fences still open).
        var failure: DownloadError?
        /// Whether the partial file is given up (`abandon`): what still waits to be written, hashed or synced is
        /// dropped (fences still open).
        var abandoned = false
        /// Whether work was ever given to the durable queue (`saveCheckpoint`): `drained()` waits for it only then.
        var durableUsed = false
        /// Whether bytes that wait to be written are dropped (`discardUnwritten`: a stop).
        var discardsWrites = false
        /// Whether a saved state of the partial file may exist: one was saved since it was last deleted, or it is
        /// not known (`removeSavedState()`).
        var stateMayExist = true
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
        /// Bytes copied into blocks so far (`appendWrite`).
        var copied: Int64 = 0
        /// Work for the hasher, in order, and whether a drain of it is scheduled on the hash queue (see `toHasher`).
        var hashWork: [@Sendable () -> Void] = []
        var hashScheduled = false
        /// Whether the hash stage's work runs on the disk queue's thread now (`toHasher`): it must not wait for writes.
        var hashingInline = false
        /// Whether every stage is idle and `Transfer.run()` owns the pipeline (before the first command, and after
        /// `drained()` until the next command): it may then touch the stages' fields from anywhere (`QueueOwned`).
        var handedOver = true

        /// Queues written bytes: copied into the block of the last command when it is a write with room left, else
        /// into a new block. URLSession's chunk (16 KiB, allocated on its thread) is then freed at once instead of
        /// waiting for the disk on another thread: freed chunks spread over many malloc arenas kept 20 downloads at
        /// 157–171 MB, against 64–72 MB with one arena; blocks of a few hundred KiB are few and reused. The copy costs
        /// one transfer alone about 10 % of its speed on a fast link (1 GiB with `dl --no-md5`, BENCHMARKS.md) and buys
        /// it nothing, so `send` asks for it only with a memory budget or while several pipelines run.
        /// - Parameters:
        ///   - data: the bytes.
        ///   - blockSize: the most bytes of one block (the first block of a transfer is smaller: small files).
        mutating func appendWrite(_ data: Data, blockSize: Int) {
            copied += Int64(data.count)
            if case .write(var block)? = commands.last, block.count + data.count <= blockSize {
                commands.removeLast()  // `block` is now the only reference: the bytes are appended in place
                block.append(data)
                commands.append(.write(block))
                return
            }
            // Room for four chunks like this one (64 KiB for URLSession's 16 KiB): a small file's one short chunk takes
            // a block its size, not 64 KiB of fresh heap (issue #52); a block that fills grows as `Data` does.
            var block = Data(capacity: min(blockSize, 4 * data.count))
            block.append(data)
            commands.append(.write(block))
        }

        /// Counts `count` more bytes held in memory (fewer when negative).
        mutating func changeBuffered(by count: Int64) {
            buffered += count
            peakBuffered = max(peakBuffered, buffered)
        }

        /// Bytes that waited to be written no longer do, and are no longer held: written at an offset (which is not
        /// hashed from memory), or dropped (`discardUnwritten`).
        mutating func release(unwritten count: Int64) {
            unwritten -= count
            changeBuffered(by: -count)
        }
    }
}
