/// Sizes in messages, in binary units as `dl` shows them: `512 B`, `1.5 KiB`, `2.9 MiB`, `3.2 GiB`.
enum ByteSize {
    /// `count` bytes in the largest binary unit below it, one decimal.
    static func text(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        guard unit > 0 else { return "\(count) B" }
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10) \(units[unit])"
    }
}
