/// The hash functions this package verifies downloads with, written here (no dependency): MD5, SHA-1 and SHA-256,
/// streaming (`update` as bytes arrive, `finalize` at the end), with their digests.
///
/// They live in this namespace so that a file that also imports swift-crypto or CryptoKit, whose `SHA256`,
/// `SHA256Digest` and `Insecure.MD5` are the usual choice for hashing, keeps those names unambiguous:
/// `Hashing.SHA256` is this package's. Downloads do not need them: `Checksum` is what the API takes and returns.
public enum Hashing {}

// The short names inside the module (invisible to importers).
typealias MD5 = Hashing.MD5
typealias SHA1 = Hashing.SHA1
typealias SHA256 = Hashing.SHA256
typealias MD5Digest = Hashing.MD5Digest
typealias SHA1Digest = Hashing.SHA1Digest
typealias SHA256Digest = Hashing.SHA256Digest
typealias HashDigest = Hashing.Digest
