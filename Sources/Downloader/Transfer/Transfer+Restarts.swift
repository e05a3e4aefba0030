import Foundation

/// How a transfer ends early or starts again: stopping with the partial file kept, restarting from byte 0, and
/// giving up ranges for the rest of the download.
extension Transfer {
    /// Ends the transfer early: lets the disk finish, saves a consistent state for the next run (or, when no byte
    /// arrived — a 404, a refused connection — leaves nothing behind) and throws.
    func stop(
        _ job: TransferJob, _ position: TransferPosition, with error: DownloadError
    ) async throws(DownloadError) -> Never {
        let diskFailure = await job.drained()
        if job.offset == 0 {
            job.discardFiles()
        } else {
            if diskFailure != nil { job.catchUpAfterFailure() }
            try? job.checkpoint(position.metadata, segments: job.segmentsToSave)
        }
        throw diskFailure ?? error
    }

    /// Starts the current version again from byte 0 (the disk empties the file in order), giving up after too many
    /// restarts.
    func restart(
        _ job: TransferJob, _ position: inout TransferPosition, reason: String, _ restarts: inout Int
    ) async throws(DownloadError) {
        restarts += 1
        guard restarts <= configuration.maximumRestarts else {
            await job.drained()
            job.discardFiles()
            throw .fileChanged(url, reason: "\(reason); restarted \(configuration.maximumRestarts) times")
        }
        var metadata = ResourceMetadata()
        metadata.suggestedFilename = position.metadata.suggestedFilename
        metadata.restartedAfterMismatch = position.metadata.restartedAfterMismatch
        // What was learnt about the server holds for the whole download.
        metadata.ignoresETag = position.metadata.ignoresETag
        metadata.rangesSupported = !position.wholeOnly
        position.metadata = metadata
        position.startOver()
        job.send(.startOver(announced: []))
        job.send(.checkpoint(metadata))
    }

    /// Fetches the resource whole, without `Range`, from now on: once per download (a second time is an error).
    func fetchWhole(
        _ job: TransferJob, _ position: inout TransferPosition, _ connections: inout Int, reason: String
    ) async throws(DownloadError) {
        guard !position.wholeOnly else {
            try await stop(job, position, with: .invalidResponse(url, reason: reason + ", and failed again so"))
        }
        warn(reason)
        position.wholeOnly = true
        position.metadata.rangesSupported = false
        connections = 1
    }
}
