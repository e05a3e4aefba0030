import Downloader

// The package's MD5 under its short name, inside this test target only (the library keeps it in `Hashing`).
typealias MD5 = Hashing.MD5
