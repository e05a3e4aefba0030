import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where `dl` takes a password from — `--password`, `--password-file`, `--ask-password`, `DL_PASSWORD` — and how it
/// keeps secrets out of the process list: as curl does, the command line's passwords (and the values of
/// `Authorization`, `Proxy-Authorization` and `Cookie` headers, and a URL's password) are overwritten in the
/// process's own `argv` once parsed, so `/proc/PID/cmdline` and `ps` show them blanked for the rest of the run.
enum Secrets {
    /// Overwrites the secrets in the process's `argv` with `*` (the same length: the kernel's copy of the command
    /// line is this memory). Call after the arguments were parsed: `CommandLine.arguments` reads the same memory.
    static func blankCommandLine() {
        let count = Int(CommandLine.argc)
        let argv = CommandLine.unsafeArgv
        var index = 1
        while index < count {
            guard let pointer = argv[index] else { break }
            let text = String(cString: pointer)
            if text == "--" { break }
            if ["--password", "--http-password"].contains(text), index + 1 < count, let next = argv[index + 1] {
                blank(next, from: 0)
                index += 2
                continue
            }
            if ["--header", "-H"].contains(text), index + 1 < count, let next = argv[index + 1] {
                blankHeaderValue(next)
                index += 2
                continue
            }
            for prefix in ["--password=", "--http-password="] where text.hasPrefix(prefix) {
                blank(pointer, from: prefix.utf8.count)
            }
            if text.hasPrefix("--header=") {
                blankHeaderValue(pointer + "--header=".utf8.count)
            } else if text.hasPrefix("-H") && text.count > 2 {
                blankHeaderValue(pointer + 2)
            }
            blankURLPassword(pointer)
            index += 1
        }
    }

    /// The value of a header whose value is a secret (`Name: value`).
    private static func blankHeaderValue(_ pointer: UnsafeMutablePointer<CChar>) {
        let text = String(cString: pointer)
        guard let colon = text.firstIndex(of: ":") else { return }
        let name = text[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
        guard ["authorization", "proxy-authorization", "cookie"].contains(name) else { return }
        blank(pointer, from: text.utf8.distance(from: text.utf8.startIndex, to: colon.samePosition(in: text.utf8)!) + 1)
    }

    /// A URL's password (`scheme://user:password@host…`).
    private static func blankURLPassword(_ pointer: UnsafeMutablePointer<CChar>) {
        let bytes = Array(String(cString: pointer).utf8)
        guard let scheme = firstIndex(of: Array("://".utf8), in: bytes) else { return }
        let start = scheme + 3
        let authorityEnd =
            bytes[start...].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? bytes.endIndex
        guard let at = bytes[start..<authorityEnd].lastIndex(of: UInt8(ascii: "@")),
            let colon = bytes[start..<at].firstIndex(of: UInt8(ascii: ":"))
        else { return }
        for offset in (colon + 1)..<at { pointer[offset] = CChar(UInt8(ascii: "*")) }
    }

    private static func firstIndex(of needle: [UInt8], in bytes: [UInt8]) -> Int? {
        guard bytes.count >= needle.count else { return nil }
        return (0...(bytes.count - needle.count)).first { Array(bytes[$0..<($0 + needle.count)]) == needle }
    }

    /// Overwrites a C string from byte `offset` to its end.
    private static func blank(_ pointer: UnsafeMutablePointer<CChar>, from offset: Int) {
        var index = offset
        while pointer[index] != 0 {
            pointer[index] = CChar(UInt8(ascii: "*"))
            index += 1
        }
    }

    /// The first line of a password file (`--password-file`), without its line break.
    /// - Throws: `UsageError` when it cannot be read.
    static func password(inFile path: String) throws(UsageError) -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw UsageError(message: "--password-file: cannot read \(path)")
        }
        let text = String(decoding: data, as: UTF8.self)
        let line = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return String(line.hasSuffix("\r") ? line.dropLast() : line)
    }

    /// Asks for the password of `user`, as wget's `--ask-password` does: on the terminal without echo, or, with no
    /// terminal, one line from stdin (a script's pipe).
    /// - Parameter stdinIsTaken: stdin carries the input list (`-i -`): no password can be read there.
    /// - Throws: `UsageError` when there is no terminal and stdin is taken, or nothing was typed.
    static func askPassword(for user: String, stdinIsTaken: Bool) throws(UsageError) -> String {
        let terminal = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        if terminal >= 0 {
            defer { close(terminal) }
            let prompt = Array("Password for user '\(user)': ".utf8)
            _ = prompt.withUnsafeBytes { write(terminal, $0.baseAddress, $0.count) }
            var saved = termios()
            let canHideEcho = tcgetattr(terminal, &saved) == 0
            if canHideEcho {
                var quiet = saved
                quiet.c_lflag &= ~tcflag_t(ECHO)
                _ = tcsetattr(terminal, TCSAFLUSH, &quiet)
            }
            let line = readLine(from: terminal)
            if canHideEcho { _ = tcsetattr(terminal, TCSAFLUSH, &saved) }
            _ = write(terminal, "\n", 1)
            guard let line else { throw UsageError(message: "--ask-password: no password was typed") }
            return line
        }
        guard !stdinIsTaken else {
            throw UsageError(message: "--ask-password needs a terminal when -i - reads the URLs from stdin")
        }
        guard let line = readLine(from: STDIN_FILENO) else {
            throw UsageError(message: "--ask-password: no terminal, and stdin gave no line")
        }
        return line
    }

    /// One line from a descriptor, read a byte at a time (nothing after it is consumed); `nil` at its end.
    private static func readLine(from fd: Int32) -> String? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let count = read(fd, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            guard count == 1 else { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
            if byte == UInt8(ascii: "\n") { break }
            bytes.append(byte)
        }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}
