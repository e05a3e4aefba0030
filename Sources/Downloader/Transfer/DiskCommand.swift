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
    /// saved each time that many more bytes are hashed (a whole body streamed in one request).
    case describe(ResourceMetadata, checkpointEvery: Int64?)
    /// Save the state with this metadata once everything before is written and hashed (also `describe`s it).
    case checkpoint(ResourceMetadata)
    /// Open the fence once everything before is written and hashed.
    case fence(DiskFence)
}
