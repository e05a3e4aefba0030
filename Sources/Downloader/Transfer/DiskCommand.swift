import Foundation

/// One step of the disk work, in the order the network side asks for it.
enum DiskCommand: Sendable {
    /// Append bytes to the partial file (then hash them).
    case write(Data)
    /// Write bytes at an offset (a segment of a download fetched over several connections); they are hashed when
    /// every byte before them is in the file (the watermark reaches them).
    case writeAt(Data, offset: Int64)
    /// Empty the partial file and the hash and forget the saved state: the next byte written is byte 0. The hash is
    /// chosen for the new file (the caller's expectation, else the strongest of `announced`, else MD5).
    case startOver(announced: [Checksum])
    /// What later checkpoints save (and the total that progress reports); with `checkpointEvery`, a checkpoint is
    /// saved each time that many more bytes are hashed (a whole body streamed in one request). `paced`: the network
    /// side waits for the disk (a window, or a body that can be resumed), so the writer keeps the drive's pace
    /// (`WriteBehind`).
    case describe(ResourceMetadata, checkpointEvery: Int64?, paced: Bool)
    /// Save the state with this metadata once everything before is written and hashed (also `describe`s it).
    case checkpoint(ResourceMetadata)
    /// Open the fence once everything before is written and hashed.
    case fence(DiskFence)
}

/// When the disk queue takes a write (`DiskPipeline.send`).
enum DiskWake: Sendable {
    /// With a batch: at once once `writeBatchBytes` wait, else `writeBatchDelay` after the first.
    case batched
    /// At once: the last bytes of a window, which the next request does not wait for.
    case now
    /// With the next command that wakes the disk: the file's last bytes, after which the transfer always waits for
    /// the disk (a fence) before it verifies.
    case withNextFence
}

extension DiskCommand {
    /// Whether the command waits for the next write or fence to wake the disk (see `DiskPipeline.send`).
    var waitsForWake: Bool {
        switch self {
        case .startOver, .describe: true
        case .write, .writeAt, .checkpoint, .fence: false
        }
    }
}

/// A point in the disk queue's work that the network side can wait for: a task without blocking a thread (`wait`), or a
/// `Blocking` body on its own thread (`waitBlocking`).
final class DiskFence: Sendable {
    /// Who waits: a task, or a thread that may block (`waitBlocking`).
    private enum Waiter {
        case task(CheckedContinuation<Void, Never>)
        case thread(DispatchSemaphore)
    }

    private let state = Locked<(isOpen: Bool, waiter: Waiter?)>((false, nil))

    /// Opens the fence, resuming its waiter.
    func open() {
        let waiter = state.withLock { state -> Waiter? in
            state.isOpen = true
            defer { state.waiter = nil }
            return state.waiter
        }
        switch waiter {
        case .task(let continuation): continuation.resume()
        case .thread(let semaphore): semaphore.signal()
        case nil: break
        }
    }

    /// Waits until the fence is open (one waiter at a time).
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isOpen = state.withLock { state -> Bool in
                if !state.isOpen { state.waiter = .task(continuation) }
                return state.isOpen
            }
            if isOpen { continuation.resume() }
        }
    }

    /// Waits until the fence is open, blocking the calling thread: a `Blocking` body's, never a cooperative one
    /// (one waiter at a time).
    func waitBlocking() {
        let semaphore = state.withLock { state -> DispatchSemaphore? in
            guard !state.isOpen else { return nil }
            let semaphore = DispatchSemaphore(value: 0)
            state.waiter = .thread(semaphore)
            return semaphore
        }
        semaphore?.wait()
    }
}
