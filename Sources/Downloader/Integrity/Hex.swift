/// Hexadecimal text of bytes.
enum Hex {
    /// Lowercase hex digits of `bytes`.
    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of an even number of hex digits (either case), white space around them ignored.
    static func decode(_ text: String) -> [UInt8]? {
        var utf8 = Substring(text).utf8[...]
        while let first = utf8.first, first == 0x20 || first == 0x09 || first == 0x0a || first == 0x0d {
            utf8 = utf8.dropFirst()
        }
        while let last = utf8.last, last == 0x20 || last == 0x09 || last == 0x0a || last == 0x0d {
            utf8 = utf8.dropLast()
        }
        guard utf8.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(utf8.count / 2)
        var high: UInt8?
        for character in utf8 {
            guard let nibble = nibble(character) else { return nil }
            if let h = high {
                out.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
