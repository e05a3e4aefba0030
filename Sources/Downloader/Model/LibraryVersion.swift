/// This library's version (semantic versioning): `DownloadManager.version`, the default `User-Agent`, the header of a
/// written cookie file. Kept here, in the lowest layer, so that every folder may name it.
enum LibraryVersion {
    static let current = "1.0.0"
}
