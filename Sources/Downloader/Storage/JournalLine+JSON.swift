import Foundation

extension JournalLine {
    /// The line as JSON, written by hand: `JSONEncoder` cost about ten times more per line, which mattered when
    /// thousands of downloads change at once. `JSONDecoder` reads it back (`JournalLineTests` checks both agree).
    func json() -> Data {
        var out = JSONText()
        writeJSON(to: &out)
        return Data(out.bytes)
    }

    /// The journal's line for this: `key`, a tab, the JSON and a newline, as bytes (`Data.append` cost about 2,000
    /// instructions a call; issue #52).
    func journalLine(key: String) -> [UInt8] {
        var out = JSONText()
        out.reserve(key.utf8.count * 2 + 256)
        out.raw(key.utf8)
        out.raw(CollectionOfOne(0x09))
        writeJSON(to: &out)
        out.raw(CollectionOfOne(0x0a))
        return out.bytes
    }

    private func writeJSON(to out: inout JSONText) {
        out.open()
        switch self {
        case .remove(let url):
            out.key("remove")
            out.string(url.absoluteString)
        case .put(let entry):
            out.key("put")
            entry.write(to: &out)
        }
        out.close()
    }
}

extension JournalEntry {
    fileprivate func write(to out: inout JSONText) {
        out.open()
        out.key("url")
        out.string(url.absoluteString)
        out.key("state")
        out.string(state.rawValue)
        out.key("options")
        options.write(to: &out)
        if let filename {
            out.key("filename")
            out.string(filename)
        }
        if let totalBytesExpected {
            out.key("totalBytesExpected")
            out.integer(totalBytesExpected)
        }
        if let checksum {
            out.key("checksum")
            out.checksum(checksum)
        }
        if let verification {
            out.key("verification")
            out.string(verification.storedForm)
        }
        if credentialsNotSaved == true {
            out.key("credentialsNotSaved")
            out.boolean(true)
        }
        if interrupted == true {
            out.key("interrupted")
            out.boolean(true)
        }
        if let otherExpectations, !otherExpectations.isEmpty {
            out.key("otherExpectations")
            out.raw("[".utf8)
            for (index, expectation) in otherExpectations.enumerated() {
                if index > 0 { out.raw(",".utf8) }
                out.checksum(expectation)
            }
            out.raw("]".utf8)
        }
        if let suggestedFilename {
            out.key("suggestedFilename")
            out.string(suggestedFilename)
        }
        if let placement {
            out.key("placement")
            placement.write(to: &out)
        }
        if forgetsWhenPlaced == true {
            out.key("forgetsWhenPlaced")
            out.boolean(true)
        }
        if let replaced {
            out.key("replaced")
            replaced.write(to: &out)
        }
        if let error, let json = try? JSONEncoder().encode(error) {  // rare: only failed downloads
            out.key("error")
            out.raw(json)
        }
        out.close()
    }
}

extension JournalEntry.Placement {
    fileprivate func write(to out: inout JSONText) {
        out.open()
        out.key("name")
        out.string(name)
        out.key("length")
        out.integer(length)
        if let checksum {
            out.key("checksum")
            out.checksum(checksum)
        }
        out.close()
    }
}

extension DownloadOptions {
    /// The options as the journal writes them (`RequestSpill` parks requests with it too).
    func write(to out: inout JSONText) {
        out.open()
        out.key("headers")
        out.open()
        // Most downloads have none: no sorted copy is made for them (about 300 instructions a line; issue #52).
        if !headers.isEmpty {
            for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
                out.key(text: name)
                out.string(value)
            }
        }
        out.close()
        if let checksum {
            out.key("checksum")
            out.checksum(checksum)
        }
        if let expectedMD5 {
            out.key("expectedMD5")
            out.string(expectedMD5)
        }
        if let chosenNaming {
            out.key("naming")
            out.open()
            switch chosenNaming {
            case .md5OfURL:
                out.key("md5OfURL")
                out.raw("{}".utf8)
            case .suggested:
                out.key("suggested")
                out.raw("{}".utf8)
            case .custom(let name):
                out.key("custom")
                out.open()
                out.key("_0")
                out.string(name)
                out.close()
            }
            out.close()
        }
        out.key("computesMD5")  // its 1.0 key
        out.boolean(computesChecksum)
        if priority != 0 {
            out.key("priority")
            out.raw(String(priority).utf8)
        }
        if let destination {
            out.key("destination")
            out.string(destination.path)
        }
        if let maximumBytesPerSecond {
            out.key("maximumBytesPerSecond")
            out.raw(String(maximumBytesPerSecond).utf8)
        }
        if let connections {
            out.key("connections")
            out.raw(String(connections).utf8)
        }
        if !mirrors.isEmpty, let array = try? JSONEncoder().encode(mirrors.map(\.absoluteString)) {
            out.key("mirrors")
            out.raw(array)
        }
        out.close()
    }
}

/// A minimal JSON writer for objects of strings, integers and nested objects.
struct JSONText {
    private(set) var bytes: [UInt8] = []
    /// How deep the object being written is nested (at most 64).
    private var depth = 0
    /// Bit `n`: whether the object at depth `n + 1` has a member already (a flag per open object, without an array
    /// to allocate for every line; issue #52).
    private var hasMembers: UInt64 = 0

    mutating func open() {
        precondition(depth < 64, "JSONText nests at most 64 objects")
        bytes.append(UInt8(ascii: "{"))
        depth += 1
        hasMembers &= ~(1 << UInt64(depth - 1))
    }

    mutating func close() {
        bytes.append(UInt8(ascii: "}"))
        depth -= 1
    }

    /// Starts a member whose name is a literal, which needs no escaping: its bytes as they are. Escaping each name, with
    /// an array of flags for the open objects, cost 460 instructions a name and a small file writes 34 (issue #52).
    mutating func key(_ name: StaticString) {
        assert(name.withUTF8Buffer { !$0.contains { $0 == 0x22 || $0 == 0x5c || $0 < 0x20 } }, "a name to escape")
        separate()
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// Starts a member whose name is any text (a header's): escaped as a string.
    mutating func key(text name: String) {
        separate()
        string(name)
        bytes.append(UInt8(ascii: ":"))
    }

    /// A comma before every member but an object's first.
    private mutating func separate() {
        guard depth > 0 else { return }
        let bit: UInt64 = 1 << UInt64(depth - 1)
        if hasMembers & bit != 0 { bytes.append(UInt8(ascii: ",")) }
        hasMembers |= bit
    }

    mutating func integer(_ value: Int64) {
        bytes.append(contentsOf: String(value).utf8)
    }

    mutating func unsigned(_ value: UInt64) {
        bytes.append(contentsOf: String(value).utf8)
    }

    mutating func boolean(_ value: Bool) {
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    mutating func raw(_ json: some Sequence<UInt8>) {
        bytes.append(contentsOf: json)
    }

    mutating func reserve(_ capacity: Int) {
        bytes.reserveCapacity(capacity)
    }

    /// A JSON string: quotes, backslashes and control characters escaped, other UTF-8 as it is.
    ///
    /// The runs between escapes are appended whole (a journal line is mostly URLs and keys, which have none): byte by
    /// byte, with a table of hex digits allocated on every call, this was a quarter of the journal's instructions
    /// (issue #52).
    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var start = 0
            for index in utf8.indices {
                let byte = utf8[index]
                guard byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
                if byte < 0x20 {
                    bytes.append(contentsOf: [
                        UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                    ])
                    bytes.append(Self.hexDigit(byte >> 4))
                    bytes.append(Self.hexDigit(byte & 0x0f))
                } else {
                    bytes.append(UInt8(ascii: "\\"))
                    bytes.append(byte)
                }
                start = index + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// A checksum as a JSON string, its `description` (`md5=…`) written in place: the algorithm's name and hex digits
    /// need no escaping, and building the description first cost 1,700 instructions (issue #52).
    mutating func checksum(_ checksum: Checksum) {
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: checksum.algorithm.fieldName.utf8)
        bytes.append(UInt8(ascii: "="))
        for byte in checksum.digest {
            bytes.append(Self.hexDigit(byte >> 4))
            bytes.append(Self.hexDigit(byte & 0x0f))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// A lowercase hex digit of a value below 16.
    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }
}
