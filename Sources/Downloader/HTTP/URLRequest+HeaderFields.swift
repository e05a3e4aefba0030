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
        #if canImport(FoundationNetworking)
            guard Self.isPlain(value) else {
                setValue(value, forHTTPHeaderField: name)
                return
            }
            assert(name.capitalized == name, "\(name) is not in the form corelibs stores")
            var fields = allHTTPHeaderFields ?? [:]
            if fields[name] == nil, let other = fields.keys.first(where: { Self.equalIgnoringASCIICase($0, name) }) {
                fields[other] = nil
            }
            fields[name] = value
            allHTTPHeaderFields = fields
        #else
            setValue(value, forHTTPHeaderField: name)
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
