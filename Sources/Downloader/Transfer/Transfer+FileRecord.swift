import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A rerun after success costs a HEAD at most: the file an earlier download of the URL delivered carries a
/// `FileRecord`, and the server's answer to HEAD says whether it is still the current version.
extension Transfer {
    /// A file an earlier download of this URL delivered, where it can be known before any request: the destination,
    /// or the name the URL gives in the completed area (a name from `Content-Disposition` is learnt only from a
    /// response; such files are recognised after their first request, as identical, instead).
    struct DeliveredFile: Sendable {
        var url: URL
        var record: FileRecord
        var identity: FileIdentity
    }

    /// The file this URL delivered, if there is one and it still holds the recorded content: the same identity,
    /// or, if it was touched, the same digest when hashed again (locally). A file changed since is the user's now:
    /// never reused, never replaced.
    func deliveredFile() -> DeliveredFile? {
        let target = URL(fileURLWithPath: directory.deliveredFilePath(of: url, options: options), isDirectory: false)
        guard directory.claims.owner(of: target).map({ $0 == url }) ?? true,
            let (record, identity) = FileRecord.read(at: target, for: url), identity.size == record.length
        else { return nil }
        if identity != record.file {
            guard let recorded = record.checksum,
                (try? FileDigest.checksum(of: target, algorithm: recorded.algorithm)) == recorded
            else { return nil }
        }
        return DeliveredFile(url: target, record: record, identity: identity)
    }

    /// Answers with the recorded file when HEAD proves the server still has its version (same strong ETag or
    /// Last-Modified date, same length), with its digest (hashed again when another algorithm is expected).
    /// - Returns: the result, or `nil` when the server's version is another or that cannot be proved (the file is
    ///   then downloaded again and replaced once verified); and what HEAD said.
    func reuse(
        _ file: DeliveredFile, expected: Checksum?
    ) async throws(DownloadError) -> (result: TransferResult?, probe: Probe?) {
        guard let probe = try await probe() else { return (nil, nil) }
        var checksum = file.record.checksum
        // Hashed again only for a file HEAD proves current (`decideReuse` would refuse any other).
        if let expected, checksum?.algorithm != expected.algorithm, Self.isCurrent(file.record, probe: probe) {
            let path = file.url
            checksum = await Blocking.run { try? FileDigest.checksum(of: path, algorithm: expected.algorithm) }
        }
        guard
            let verification = Self.decideReuse(
                record: file.record, probe: probe, checksum: checksum, expected: expected,
                hashes: options.computesChecksum),
            directory.claims.claim(file.url, for: url)  // else another download's now
        else { return (nil, probe) }
        let result = TransferResult(
            fileURL: file.url, checksum: checksum, verification: verification, length: file.record.length,
            resumedBytes: file.record.length, receivedBytes: 0, suggestedFilename: probe.suggestedFilename)
        return (result, probe)
    }

    /// Records what the verified partial file is before it is placed (the inode keeps the attributes when it moves).
    func recordFile(_ pipeline: DiskPipeline, metadata: ResourceMetadata, checksum: Checksum?) {
        guard let fd = try? pipeline.files.openPartial(.read) else { return }
        defer { _ = closeDescriptor(fd) }
        guard let identity = FileIdentity(descriptor: fd), !metadata.validators.isEmpty else { return }
        FileRecord.write(
            FileRecord(validators: metadata.validators, length: pipeline.offset, checksum: checksum, file: identity),
            of: url, to: fd)
    }

    /// Records the verified partial file (`FileRecord`), moves it into the completed area and forgets its saved
    /// state.
    /// - Parameter replacing: a file of this URL's that the verified one replaces, if any.
    func complete(
        _ pipeline: DiskPipeline, metadata: ResourceMetadata, checksum: Checksum?, replacing: URL?
    ) throws(DownloadError) -> URL {
        recordFile(pipeline, metadata: metadata, checksum: checksum)
        let target: FilePlacement.Target
        if let replacing, options.destination == nil {
            target = .replace(replacing)
        } else {
            target = directory.placementTarget(for: options, url: url, suggested: metadata.suggestedFilename)
        }
        if let destination = options.destination {
            do {
                try FileManager.default.createDirectory(
                    at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
            } catch {
                throw .fileSystem(
                    url, reason: "cannot create the folder of \(destination.path): \(error.localizedDescription)")
            }
        }
        let suggested = metadata.suggestedFilename
        let file = try FilePlacement.place(
            .partial(pipeline.files), at: target, length: pipeline.offset, checksum: checksum, downloadURL: url,
            claims: directory.claims,
            willClaim: { file in
                observer.transferWillPlace(
                    TransferPlacement(
                        file: file, length: pipeline.offset, checksum: checksum, suggestedFilename: suggested))
            })
        pipeline.files.removeState()
        return file
    }
}
