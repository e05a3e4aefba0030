import Foundation

extension FileManager {
    /// The size of the file at `url` in bytes, or `nil` when there is no such file.
    func sizeOfItem(at url: URL) -> Int64? {
        (try? attributesOfItem(atPath: url.path))?[.size].flatMap { ($0 as? NSNumber)?.int64Value }
    }
}
