import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a delivered file remembers about its download, in extended attributes that live as long as the file (and
/// outlive the state folder, which a finished `dl` run removes): the URL in `user.xdg.origin.url`, as `wget --xattr`
/// and `curl --xattr` write it, and the version, length, digest and identity in `user.downloader.record`.
///
/// A later download of the same URL that finds its file asks the server HEAD whether the version is still the same
/// and, if so, answers with the file instead of fetching it again. File systems without user extended attributes
/// keep no record; those downloads simply run again.
struct FileRecord: Codable, Sendable, Equatable {
    /// The resource's version when the file was downloaded.
    var validators: Validators
    var length: Int64
    /// The file's digest, when it was hashed.
    var checksum: Checksum?
    /// The file as it was when the record was written: an unchanged identity means the digest still describes it.
    var file: FileIdentity

    static let urlAttribute = "user.xdg.origin.url"
    static let recordAttribute = "user.downloader.record"

    /// The text a URL is recorded as: without credentials (they are never written to disk).
    static func recordedText(_ url: URL) -> String {
        url.withoutCredentials.absoluteString
    }

    /// Writes the record of `url` on an open file. Best effort: a file system without extended attributes keeps none.
    static func write(_ record: FileRecord, of url: URL, to fd: Int32) {
        set(Array(recordedText(url).utf8), named: urlAttribute, on: fd)
        set(record.json(), named: recordAttribute, on: fd)
    }

    /// The record as JSON, written by hand (`JSONEncoder` cost 60,000 instructions a file, issue #52); `JSONDecoder`
    /// reads it back (`FileRecordTests` checks both agree).
    func json() -> [UInt8] {
        var out = JSONText()
        out.reserve(256)
        out.open()
        out.key("validators")
        out.open()
        if let etag = validators.etag {
            out.key("etag")
            out.string(etag)
        }
        if let lastModified = validators.lastModified {
            out.key("lastModified")
            out.string(lastModified)
        }
        if let weak = validators.lastModifiedIsWeak {
            out.key("lastModifiedIsWeak")
            out.boolean(weak)
        }
        out.close()
        out.key("length")
        out.integer(length)
        if let checksum {
            out.key("checksum")
            out.checksum(checksum)
        }
        out.key("file")
        out.open()
        out.key("size")
        out.integer(file.size)
        out.key("inode")
        out.unsigned(file.inode)
        out.key("device")
        out.unsigned(file.device)
        out.key("modified")
        out.integer(file.modified)
        out.close()
        out.close()
        return out.bytes
    }

    /// The record of `url` on the file at `path`: only a regular file (not a link to one) owned by this user, whose
    /// recorded URL is `url`.
    static func read(at path: URL, for url: URL) -> (record: FileRecord, identity: FileIdentity)? {
        read(atPath: path.filePath, for: url)
    }

    /// The record of `url` on the file at `path` (see `read(at:for:)`).
    static func read(atPath path: String, for url: URL) -> (record: FileRecord, identity: FileIdentity)? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { _ = closeDescriptor(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid(),
            let recordedURL = get(urlAttribute, from: fd), recordedURL == Array(recordedText(url).utf8),
            let json = get(recordAttribute, from: fd),
            let record = try? JSONDecoder().decode(FileRecord.self, from: Data(json))
        else { return nil }
        return (record, FileIdentity(info))
    }

    /// Whether the file at `path` records another URL than `url` as its origin (`user.xdg.origin.url`): a file
    /// delivered for another download, or by `wget --xattr` or `curl --xattr` from elsewhere. `false` when it records
    /// none (or cannot be read).
    static func recordsAnotherOrigin(at path: URL, than url: URL) -> Bool {
        recordedOrigin(atPath: path.filePath).map { $0 != Array(recordedText(url).utf8) } ?? false
    }

    /// Whether the file at `path` records `url` as its origin (`user.xdg.origin.url`): three system calls, nothing
    /// decoded; `read(at:for:)` decides whether the file is really that download's.
    static func recordsOrigin(atPath path: String, _ url: URL) -> Bool {
        recordedOrigin(atPath: path) == Array(recordedText(url).utf8)
    }

    /// The origin the file at `path` records, without following a link; `nil` when none (or it cannot be read).
    private static func recordedOrigin(atPath path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { _ = closeDescriptor(fd) }
        return get(urlAttribute, from: fd)
    }

    private static func set(_ value: [UInt8], named name: String, on fd: Int32) {
        value.withUnsafeBytes { bytes in
            #if canImport(Darwin)
                _ = fsetxattr(fd, name, bytes.baseAddress, bytes.count, 0, 0)
            #else
                _ = XattrCalls.set?(fd, name, bytes.baseAddress, bytes.count, 0)
            #endif
        }
    }

    private static func get(_ name: String, from fd: Int32) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { bytes -> Int in
            #if canImport(Darwin)
                fgetxattr(fd, name, bytes.baseAddress, bytes.count, 0, 0)
            #else
                XattrCalls.get?(fd, name, bytes.baseAddress, bytes.count) ?? -1
            #endif
        }
        return count >= 0 ? Array(buffer.prefix(count)) : nil
    }
}

#if !canImport(Darwin)
    /// `fsetxattr(2)` and `fgetxattr(2)`, looked up by name: the C library has them, the Glibc module does not export
    /// `sys/xattr.h`.
    private enum XattrCalls {
        typealias Set = @convention(c) (Int32, UnsafePointer<CChar>, UnsafeRawPointer?, Int, Int32) -> Int32
        typealias Get = @convention(c) (Int32, UnsafePointer<CChar>, UnsafeMutableRawPointer?, Int) -> Int

        static let set: Set? = dlsym(nil, "fsetxattr").map { unsafeBitCast($0, to: Set.self) }
        static let get: Get? = dlsym(nil, "fgetxattr").map { unsafeBitCast($0, to: Get.self) }
    }
#endif
