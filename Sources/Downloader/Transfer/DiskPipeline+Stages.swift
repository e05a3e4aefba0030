import Foundation

/// What each stage of a `DiskPipeline` owns, as types: the disk queue's `DiskStage` and the hash queue's `HashStage`,
/// each in a `QueueOwned` box (checked in debug builds). The shorthands below forward to them, so the stages' code
/// reads like plain fields while every access goes through its owner's box.
extension DiskPipeline {
    /// The disk queue's state (or the transfer's, when the pipeline is handed over).
    struct DiskStage {
        /// Appends to the partial file.
        var writer: FileWriter?
        /// Bytes in the partial file from byte 0 without a gap (the watermark).
        var offset: Int64 = 0
        /// Segmented: the writer at offsets, and the ranges written after `offset` (sorted, disjoint, not touching it).
        var positional: FileWriter?
        var beyond: [Range<Int64>] = []
        /// Whether the file is written in segments (its saved state lists them).
        var segmented = false
        /// Bytes written at offsets since the last checkpoint was queued.
        var segmentBytesSinceCheckpoint: Int64 = 0
        /// Bytes received from the network by this run and written (not counting what was already on disk).
        var receivedThisRun: Int64 = 0
        /// Whether the free space was compared with the bytes still to come (`checkFreeSpace`).
        var checkedFreeSpace = false
        /// Whether the partial file's room was reserved (`reserveSpace`).
        var reservedSpace = false
        /// The total length the last described metadata gives (for progress).
        var total: Int64?
    }

    /// The hash queue's state (or the transfer's, when the pipeline is handed over).
    struct HashStage {
        /// The running hash; `nil` without hashing.
        var hash: StreamingHash?
        /// Bytes covered by `hash` (or that would be, without hashing); never more than `offset`.
        var hashedOffset: Int64 = 0
        /// What checkpoints save, and how often a streamed body saves one.
        var described = ResourceMetadata()
        var checkpointEvery: Int64?
        /// `hashedOffset` at the last saved checkpoint.
        var checkpointOffset: Int64 = 0
        /// The partial file opened for reading back (bytes written out of order, or beyond the backlog) and syncing.
        var reader: Int32 = -1
    }

    // Disk stage.
    var writer: FileWriter? {
        _read { yield diskStage.value.writer }
        _modify { yield &diskStage.value.writer }
    }
    var offset: Int64 {
        _read { yield diskStage.value.offset }
        _modify { yield &diskStage.value.offset }
    }
    var positional: FileWriter? {
        _read { yield diskStage.value.positional }
        _modify { yield &diskStage.value.positional }
    }
    var beyond: [Range<Int64>] {
        _read { yield diskStage.value.beyond }
        _modify { yield &diskStage.value.beyond }
    }
    var segmented: Bool {
        _read { yield diskStage.value.segmented }
        _modify { yield &diskStage.value.segmented }
    }
    var segmentBytesSinceCheckpoint: Int64 {
        _read { yield diskStage.value.segmentBytesSinceCheckpoint }
        _modify { yield &diskStage.value.segmentBytesSinceCheckpoint }
    }
    var receivedThisRun: Int64 {
        _read { yield diskStage.value.receivedThisRun }
        _modify { yield &diskStage.value.receivedThisRun }
    }
    var checkedFreeSpace: Bool {
        _read { yield diskStage.value.checkedFreeSpace }
        _modify { yield &diskStage.value.checkedFreeSpace }
    }
    var reservedSpace: Bool {
        _read { yield diskStage.value.reservedSpace }
        _modify { yield &diskStage.value.reservedSpace }
    }
    var total: Int64? {
        _read { yield diskStage.value.total }
        _modify { yield &diskStage.value.total }
    }

    // Hash stage.
    var hash: StreamingHash? {
        _read { yield hashStage.value.hash }
        _modify { yield &hashStage.value.hash }
    }
    var hashedOffset: Int64 {
        _read { yield hashStage.value.hashedOffset }
        _modify { yield &hashStage.value.hashedOffset }
    }
    var described: ResourceMetadata {
        _read { yield hashStage.value.described }
        _modify { yield &hashStage.value.described }
    }
    var checkpointEvery: Int64? {
        _read { yield hashStage.value.checkpointEvery }
        _modify { yield &hashStage.value.checkpointEvery }
    }
    var checkpointOffset: Int64 {
        _read { yield hashStage.value.checkpointOffset }
        _modify { yield &hashStage.value.checkpointOffset }
    }
    var reader: Int32 {
        _read { yield hashStage.value.reader }
        _modify { yield &hashStage.value.reader }
    }
}
