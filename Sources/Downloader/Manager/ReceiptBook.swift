/// The receipts of a manager with the options to resume them, in the order downloads were first requested.
///
/// Insertion-ordered with O(1) look-up, insertion and removal: removed places are left empty and compacted once they
/// are the majority, so removing thousands of downloads is not quadratic.
struct ReceiptBook<Key: Hashable> {
    private var records: [Key: ReceiptRecord] = [:]
    private var order: [Key?] = []
    /// The serial number of each place of `order`: increasing, never reused, so a page's cursor survives removals
    /// and compaction.
    private var serials: [Int] = []
    private var nextSerial = 0
    private var position: [Key: Int] = [:]
    /// Keys by their identifier (`DownloadReceipt.identifier`), when `identify` is given: built by the first
    /// `key(identifiedBy:)` and kept from then on. Not built before: an identifier is an MD5 of the URL, which cost
    /// every enqueue of a list runner that never looks one up (issue #52).
    private var identified: [String: Key]?
    private let identify: (@Sendable (Key) -> String)?

    /// Creates an empty book.
    /// - Parameter identify: a key's identifier, for `key(identifiedBy:)`; `nil` keeps no such index.
    init(identify: (@Sendable (Key) -> String)? = nil) {
        self.identify = identify
    }

    var count: Int { records.count }

    /// The key whose identifier is `identifier`, if it is in the book.
    mutating func key(identifiedBy identifier: String) -> Key? {
        guard let identify else { return nil }
        if identified == nil {
            var index: [String: Key] = [:]
            index.reserveCapacity(records.count)
            for case let key? in order { index[identify(key)] = key }
            identified = index
        }
        return identified?[identifier]
    }

    subscript(key: Key) -> ReceiptRecord? {
        get { records[key] }
        set {
            if let newValue {
                if let index = records.index(forKey: key) {
                    records.values[index] = newValue  // the old record is not handed back (`updateValue` copies it)
                } else {
                    records[key] = newValue
                    if let identify, identified != nil { identified?[identify(key)] = key }
                    position[key] = order.count
                    order.append(key)
                    serials.append(nextSerial)
                    nextSerial += 1
                }
            } else if records.removeValue(forKey: key) != nil, let index = position.removeValue(forKey: key) {
                if let identify, identified != nil { identified?[identify(key)] = nil }
                order[index] = nil
                compactIfSparse()
            }
        }
    }

    /// Whether there is a record of `key` (without copying it, as `book[key] != nil` does).
    func contains(_ key: Key) -> Bool {
        records.index(forKey: key) != nil
    }

    /// Changes the record of `key` where it is stored: one look-up and no copy of the record, where `book[key]`
    /// read, changed and written back costs two look-ups and a copy (issue #52). It is also how the manager reads part
    /// of a record: a non-mutating read of `records.values[index]` handed the closure a copy (measured with callgrind:
    /// 8,000 to 10,000 instructions a small file more than reading through this).
    /// - Parameters:
    ///   - key: the record's key.
    ///   - change: what to do with the record.
    /// - Returns: what `change` returned, or `nil` when there is no record of `key` (and `change` did not run).
    @discardableResult
    mutating func update<Result>(_ key: Key, _ change: (inout ReceiptRecord) -> Result) -> Result? {
        records.modifyValue(forKey: key, change)
    }

    /// The keys in request order.
    var keys: [Key] { order.compactMap { $0 } }

    /// The records in request order.
    var all: [ReceiptRecord] { order.compactMap { $0.flatMap { records[$0] } } }

    /// `keys` in request order, keys that are no longer in the book first.
    ///
    /// Each key's position is looked up once, not in every comparison: hashing a URL costs more than the sort.
    func inRequestOrder(_ keys: some Collection<Key>) -> [Key] {
        keys.map { (position: position[$0] ?? -1, key: $0) }.sorted { $0.position < $1.position }.map(\.key)
    }

    /// Up to `limit` records in request order, starting after the record numbered `cursor` (`nil`: from the first).
    /// - Returns: the records, and the cursor of the next page (`nil` after the last record).
    func page(after cursor: Int?, limit: Int) -> (records: [ReceiptRecord], next: Int?) {
        // The first place whose serial is past the cursor (serials increase along `order`).
        var low = 0
        var high = serials.count
        if let cursor {
            while low < high {
                let middle = (low + high) / 2
                if serials[middle] <= cursor { low = middle + 1 } else { high = middle }
            }
        }
        var page: [ReceiptRecord] = []
        var index = low
        while index < order.count, page.count < max(1, limit) {
            if let key = order[index], let record = records[key] { page.append(record) }
            index += 1
        }
        let more = order[index...].contains { $0 != nil }
        return (page, more ? serials[index - 1] : nil)
    }

    private mutating func compactIfSparse() {
        guard order.count > 64, order.count > 2 * records.count else { return }
        let kept = order.indices.filter { order[$0] != nil }
        order = kept.map { order[$0] }
        serials = kept.map { serials[$0] }
        for (index, key) in order.enumerated() { position[key!] = index }
    }
}
