import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLRequest {
    /// Sets a header field the package itself sends (`Accept-Encoding`, `Range`, `User-Agent`), as
    /// `setValue(_:forHTTPHeaderField:)` does.
    ///
    /// On Linux that call capitalizes the name through ICU, checks the value scalar by scalar and lower-cases every
    /// field name to find one to replace: about 14,000 instructions a field, three fields a request (issue #52). A name
    /// given in the form corelibs stores (each word capitalized, as `name.capitalized` gives it) and a value of visible
    /// ASCII and spaces is written into the fields at once; a field of the same name in another case is replaced, as
    /// `setValue` replaces it. Anything else, and every call on Darwin, goes through `setValue`.
    /// - Parameters:
    ///   - value: the value.
    ///   - name: the field's name, each word capitalized (`If-Range`, not `if-range`).
    mutating func setPackageField(_ value: String, for name: String) {
        setPackageFields([(name, value)])
    }

    /// Sets several fields the package sends, as `setPackageField` sets each, in order: with one copy of the fields
    /// out of the request and back, which cost corelibs about 8,000 instructions a time (issue #52). When any value is
    /// not plain, every field goes through `setValue`, one by one.
    /// - Parameter fields: the names (each word capitalized) and values.
    mutating func setPackageFields(_ fields: [(name: String, value: String)]) {
        #if canImport(FoundationNetworking)
            if fields.isEmpty { return }
            guard fields.allSatisfy({ Self.isPlain($0.value) }) else {
                for (name, value) in fields { setValue(value, forHTTPHeaderField: name) }
                return
            }
            var all = allHTTPHeaderFields ?? [:]
            all.reserveCapacity(all.count + fields.count)  // no regrowth on the way (two a fresh request)
            for (name, value) in fields {
                assert(name.capitalized == name, "\(name) is not in the form corelibs stores")
                // One look-up for a name that is there or new; the fields are searched only for a new one.
                guard all.updateValue(value, forKey: name) == nil,
                    let other = all.keys.first(where: { $0 != name && Self.equalIgnoringASCIICase($0, name) })
                else { continue }
                all[other] = nil
            }
            allHTTPHeaderFields = all
        #else
            for (name, value) in fields { setValue(value, forHTTPHeaderField: name) }
        #endif
    }

    /// Whether a value holds only visible ASCII and spaces (what corelibs' check accepts, and more than a value of
    /// ours ever holds).
    static func isPlain(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
    }

    /// Whether two field names are equal but for the case of ASCII letters.
    static func equalIgnoringASCIICase(_ first: String, _ second: String) -> Bool {
        first.utf8.count == second.utf8.count
            && zip(first.utf8, second.utf8).allSatisfy { a, b in
                a == b || (a | 0x20 == b | 0x20 && (a | 0x20) >= 0x61 && (a | 0x20) <= 0x7A)
            }
    }
}
