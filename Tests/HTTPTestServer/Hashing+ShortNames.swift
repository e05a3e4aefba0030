import Downloader

// The package's hash functions under their short names, inside this test target only (the library keeps them in
// `Hashing` so that they never clash with swift-crypto's or CryptoKit's).
typealias MD5 = Hashing.MD5
typealias SHA1 = Hashing.SHA1
typealias SHA256 = Hashing.SHA256
typealias MD5Digest = Hashing.MD5Digest
typealias SHA256Digest = Hashing.SHA256Digest
