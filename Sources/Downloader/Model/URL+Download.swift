import Foundation

extension URL {
    /// Makes a download URL from text a person typed or pasted: spaces, non-ASCII characters and stray `%` in the
    /// path, query and fragment are percent-encoded; valid escapes are kept.
    /// - Parameter text: for example `"https://example.com/a file/ü.zip"`.
    /// - Throws: `DownloadError.invalidURL` when no host can be found or the host is not ASCII;
    ///   `DownloadError.unsupportedScheme` for schemes other than http and https.
    public static func download(_ text: String) throws(DownloadError) -> URL {
        try download(text, takesPlainText: true)
    }

    /// `download(_:)`, with the shortcut for text that needs no change (`isPlain`) on or off: the tests check that
    /// both ways give the same answer.
    static func download(_ text: String, takesPlainText: Bool) throws(DownloadError) -> URL {
        let candidate: String
        if takesPlainText && isPlain(text) {
            candidate = text
        } else {
            let trimmed = text.trimmingWhitespace()
            guard let schemeEnd = trimmed.firstRange(of: "://") else {
                throw .invalidURL(text, reason: "no scheme (expected http:// or https://)")
            }
            let afterScheme = trimmed[schemeEnd.upperBound...]
            let authorityEnd = afterScheme.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? afterScheme.endIndex
            let authority = afterScheme[..<authorityEnd]
            guard !authority.isEmpty, authority.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
                throw .invalidURL(text, reason: "the host is empty or not ASCII")
            }
            let rest = percentEncode(String(afterScheme[authorityEnd...]))
            candidate = String(trimmed[..<schemeEnd.upperBound] + authority + rest)
        }
        guard let url = URL(string: candidate), url.host != nil else {
            throw .invalidURL(text, reason: "not a valid URL")
        }
        try url.validateForDownload()
        return url
    }

    /// Whether `download(_:)` would take the text as it is: every byte one a URL may carry (`urlBytes`: printable
    /// ASCII, no space, no `%`) or a `%XX` escape, a `://`, and a non-empty authority after it.
    ///
    /// Such text is not trimmed (no space), and nothing in it is encoded, so the steps that look at it character by
    /// character are skipped: they cost each URL of a list 63,000 instructions beyond `URL(string:)` (issue #52).
    static func isPlain(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            var index = 0
            var authorityStart = -1
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "%") {
                    guard index + 2 < bytes.count, bytes[index + 1].isHexDigit, bytes[index + 2].isHexDigit else {
                        return false
                    }
                    index += 3
                    continue
                }
                guard urlBytes[Int(byte)] else { return false }
                if authorityStart < 0, byte == UInt8(ascii: ":"), index + 2 < bytes.count,
                    bytes[index + 1] == UInt8(ascii: "/"), bytes[index + 2] == UInt8(ascii: "/")
                {
                    authorityStart = index + 3
                    index += 3
                    continue
                }
                index += 1
            }
            // A `%` before the `://` or in the authority is kept as it is by the long way too; an empty authority is
            // an error that the long way words.
            guard authorityStart >= 0, authorityStart < bytes.count else { return false }
            let first = bytes[authorityStart]
            return first != UInt8(ascii: "/") && first != UInt8(ascii: "?") && first != UInt8(ascii: "#")
        }
    }

    /// The bytes a URL's path, query or fragment may carry as they are (RFC 3986's unreserved and reserved characters),
    /// indexed by byte.
    private static let urlBytes: [Bool] = {
        var table = [Bool](repeating: false, count: 256)
        for byte in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/?#".utf8 {
            table[Int(byte)] = true
        }
        return table
    }()

    /// Checks that this URL can be downloaded: http or https with a host.
    /// - Throws: `DownloadError.unsupportedScheme` or `DownloadError.invalidURL`.
    func validateForDownload() throws(DownloadError) {
        guard let scheme = scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw .unsupportedScheme(self)
        }
        guard let host, !host.isEmpty else { throw .invalidURL(absoluteString, reason: "no host") }
    }

    /// The URL without its user and password: a download's identity. Credentials are never part of it, so they are
    /// never saved (journal, partial state, extended attributes) nor shown; the manager keeps them in memory for the
    /// requests.
    public var withoutCredentials: URL {
        var text = absoluteString
        // Most URLs have no `@` at all: no search for the authority (`range(of:)` goes through NSString). `memchr`
        // over the text's bytes: `utf8.contains` went byte by byte, 1,000 instructions a URL (issue #52).
        let hasAt = text.withUTF8 { bytes in
            bytes.baseAddress.map { memchr($0, Int32(UInt8(ascii: "@")), bytes.count) != nil } ?? false
        }
        guard hasAt, let schemeEnd = text.firstRange(of: "://") else { return self }
        let afterScheme = text[schemeEnd.upperBound...]
        let authorityEnd = afterScheme.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? afterScheme.endIndex
        guard let at = afterScheme[..<authorityEnd].lastIndex(of: "@") else { return self }
        return URL(string: String(text[..<schemeEnd.upperBound]) + String(text[text.index(after: at)...])) ?? self
    }

    /// `lastPathComponent`, read off the URL's text when its path is plain: ASCII, ending in a name, with no `%`
    /// (nothing to decode), `;`, `?` or `#`. Anything else goes to `lastPathComponent`, which parses the URL again:
    /// 3,700 instructions a call, and a small file's download asked it seven times (issue #52).
    var fileName: String {
        guard baseURL == nil else { return lastPathComponent }
        var text = relativeString
        let start = text.withUTF8 { bytes -> Int? in
            guard let schemeEnd = Self.schemeSeparatorEnd(bytes) else { return nil }
            var index = schemeEnd
            while index < bytes.count, bytes[index] != UInt8(ascii: "/") {  // the authority
                if bytes[index] == UInt8(ascii: "?") || bytes[index] == UInt8(ascii: "#") { return nil }
                index += 1
            }
            guard index < bytes.count - 1 else { return nil }  // no path, or the path is "/" alone
            var nameStart = index + 1
            for position in index..<bytes.count {
                if bytes[position] == UInt8(ascii: "/") { nameStart = position + 1 }
                if !Self.isPlainPathByte(bytes[position]) { return nil }
            }
            guard nameStart < bytes.count else { return nil }  // a trailing slash
            return nameStart
        }
        guard let start else { return lastPathComponent }
        return String(Substring(text.utf8.dropFirst(start)))
    }

    /// `pathExtension`, read off `fileName` when that is plain: letters, digits, `-` and `_` around one or more dots,
    /// none of them first or last, none doubled. Anything else goes to `pathExtension` (5,900 instructions a call).
    var fileExtension: String {
        let name = fileName
        var lastDot: String.Index?
        var previousWasDot = true  // a dot first is not plain
        for index in name.utf8.indices {
            let byte = name.utf8[index]
            switch byte {
            case UInt8(ascii: "."):
                if previousWasDot { return pathExtension }
                lastDot = index
                previousWasDot = true
                continue
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                previousWasDot = false
            default:
                return pathExtension
            }
        }
        guard !previousWasDot else { return pathExtension }  // empty, or a dot last
        guard let lastDot else { return "" }
        return String(name[name.utf8.index(after: lastDot)...])
    }

    /// `path` of a file URL, read off its text when that is plain: `file://` and an absolute path of ASCII without
    /// `%` (nothing to decode), `;`, `?`, `#` or a trailing slash. Anything else goes to `path`, which decodes the URL
    /// again: 3,300 instructions a call, and placing a small file asked it six times (issue #52).
    var filePath: String {
        guard baseURL == nil else { return path }
        var text = relativeString
        let plain = text.withUTF8 { bytes -> Bool in
            let prefix = "file:///".utf8
            guard bytes.count > prefix.count, bytes.starts(with: prefix), bytes[bytes.count - 1] != UInt8(ascii: "/")
            else { return false }
            return bytes.allSatisfy(Self.isPlainPathByte)
        }
        return plain ? String(Substring(text.utf8.dropFirst(7))) : path
    }

    /// Whether a byte of a URL's path reads the same in the text and in Foundation's decoded path: ASCII, and not
    /// `%` (an escape), `;`, `?` or `#` (which end a path segment or the path). `fileName` and `filePath` share it.
    private static func isPlainPathByte(_ byte: UInt8) -> Bool {
        byte < 0x80 && byte != UInt8(ascii: "%") && byte != UInt8(ascii: ";") && byte != UInt8(ascii: "?")
            && byte != UInt8(ascii: "#")
    }

    /// Where the text after `scheme://` starts, if the text starts with a scheme and `://`.
    private static func schemeSeparatorEnd(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var index = 0
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."):
                index += 1
            case UInt8(ascii: ":"):
                guard index > 0, index + 2 < bytes.count, bytes[index + 1] == UInt8(ascii: "/"),
                    bytes[index + 2] == UInt8(ascii: "/")
                else { return nil }
                return index + 3
            default:
                return nil
            }
        }
        return nil
    }

    /// `scheme://host:port`, lower-cased, the default port written out: what connections, credentials and origin-bound
    /// headers are kept by.
    var origin: String {
        let scheme = scheme?.lowercased() ?? ""
        return "\(scheme)://\(host?.lowercased() ?? ""):\(port ?? (scheme == "https" ? 443 : 80))"
    }

    /// Whether the URL carries a user or a password.
    var hasCredentials: Bool { withoutCredentials != self }

    /// A download's identity (`DownloadReceipt.identifier`), the stem of its local files: the MD5 of the URL without
    /// credentials (they are no part of a download's identity).
    var downloadIdentifier: String {
        MD5.hash(data: Array(withoutCredentials.absoluteString.utf8)).hexString
    }

    /// The name of a download's file before it is complete: `key` (`downloadIdentifier`) plus the URL's extension, if
    /// it has a sane one (ASCII letters and digits, at most 16).
    func downloadFilename(key: String) -> String {
        let ext = fileExtension
        // ASCII letters and digits, read as bytes: a scalar's Unicode properties cost 330 instructions a letter.
        let safeExtension =
            !ext.isEmpty && ext.utf8.count <= 16
            && ext.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"):
                    true
                default: false
                }
            }
        return key + (safeExtension ? "." + ext : "")
    }

    /// The URL as text with its credentials hidden: `https://user:***@host/…` (a user name alone, which is often a
    /// token, becomes `***@host`). Use it wherever a URL is shown: messages, logs, listings.
    public var redactedAbsoluteString: String {
        Self.redactingCredentials(absoluteString)
    }

    /// Hides the password (or a lone user name) in the authority of a URL given as text.
    static func redactingCredentials(_ text: String) -> String {
        guard let schemeEnd = text.range(of: "://") else { return text }
        let afterScheme = text[schemeEnd.upperBound...]
        let authorityEnd = afterScheme.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? afterScheme.endIndex
        let authority = afterScheme[..<authorityEnd]
        guard let at = authority.lastIndex(of: "@") else { return text }
        let userInfo = authority[..<at]
        let redacted = userInfo.firstIndex(of: ":").map { userInfo[..<$0] + ":***" } ?? "***"
        return String(text[..<schemeEnd.upperBound]) + redacted + String(text[at...])
    }

    /// Encodes every byte that may not appear in a URL's path, query or fragment, keeping `%XX` escapes.
    private static func percentEncode(_ text: String) -> String {
        let bytes = Array(text.utf8)
        var out = ""
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%"), index + 2 < bytes.count, bytes[index + 1].isHexDigit,
                bytes[index + 2].isHexDigit
            {
                out += String(decoding: bytes[index...index + 2], as: UTF8.self)
                index += 3
                continue
            }
            if urlBytes[Int(byte)] {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += String(format: "%%%02X", byte)
            }
            index += 1
        }
        return out
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (48...57).contains(self) || (65...70).contains(self) || (97...102).contains(self)
    }
}

extension StringProtocol {
    /// The text without leading and trailing whitespace and newlines, as `trimmingCharacters(in:
    /// .whitespacesAndNewlines)` gives it without its cost (it goes through `NSString`: a tenth of reading a list).
    func trimmingWhitespace() -> SubSequence {
        var text = self[...]
        while text.first?.isWhitespace == true { text = text.dropFirst() }
        while text.last?.isWhitespace == true { text = text.dropLast() }
        return text
    }
}
