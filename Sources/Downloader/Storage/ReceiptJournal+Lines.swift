import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension ReceiptJournal {
    /// A journal's bytes split into lines without decoding them: each download's latest line, in the order the
    /// downloads first appeared. A value, read by the manager that opens the journal and by `dl --list`, which reads it
    /// without the lock.
    struct Lines: Sendable {
        /// Keys in the order they first appeared.
        private(set) var order: [String] = []
        /// The byte range of each key's latest line, its newline included.
        private(set) var ranges: [String: Range<Int>] = [:]
        /// Keys whose latest line is a removal.
        private(set) var removed: Set<String> = []
        /// Bytes up to the end of the last whole line: a last line without its newline was torn by a crash.
        private(set) var wholeBytes = 0
        /// Whole lines without a key (no tab).
        private(set) var keyless = 0

        /// Splits `data` into lines.
        init(_ data: Data) {
            data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
                guard let base = bytes.baseAddress else { return }
                func find(_ byte: UInt8, from: Int, to: Int) -> Int? {
                    memchr(base + from, Int32(byte), to - from).map { $0 - UnsafeMutableRawPointer(mutating: base) }
                }
                var start = 0
                while start < bytes.count {
                    guard let newline = find(0x0a, from: start, to: bytes.count) else { break }  // torn: dropped
                    defer { start = newline + 1 }
                    wholeBytes = newline + 1
                    guard let tab = find(0x09, from: start, to: newline) else {
                        keyless += 1
                        continue
                    }
                    let key = String(decoding: bytes[start..<tab], as: UTF8.self)
                    if ranges[key] == nil { order.append(key) }
                    ranges[key] = start..<(newline + 1)
                    // A removal line is recognised without decoding: `{"remove":…}`.
                    if bytes[(tab + 1)...].starts(with: Array(#"{"remove""#.utf8)) {
                        removed.insert(key)
                    } else {
                        removed.remove(key)
                    }
                }
            }
        }

        /// One download's latest line, decoded.
        struct Entry {
            let key: String
            let entry: JournalEntry
            /// Its line's byte range in the journal.
            let range: Range<Int>
        }

        /// Decodes the latest line of each download that was not removed.
        /// - Parameter data: the bytes these lines were split from.
        /// - Returns: the entries in first-appearance order, and the keys whose line could not be decoded.
        func entries(in data: Data) -> (entries: [Entry], undecodable: [String]) {
            let decoder = JSONDecoder()
            var entries: [Entry] = []
            var undecodable: [String] = []
            for key in order {
                guard let range = ranges[key], !removed.contains(key) else { continue }
                let json = data[(data[range].firstIndex(of: 0x09)! + 1)..<(range.upperBound - 1)]
                guard case .put(let entry)? = try? decoder.decode(JournalLine.self, from: json) else {
                    undecodable.append(key)
                    continue
                }
                entries.append(Entry(key: key, entry: entry, range: range))
            }
            return (entries, undecodable)
        }
    }
}
