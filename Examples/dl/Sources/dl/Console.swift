import Downloader
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `dl`'s two outputs, written with `write(2)`: a closed stdout or stderr (the reader of a pipe left, as `| head`
/// does; a terminal closed with its ssh session) never stops the downloads. SIGPIPE is ignored, and
/// `FileHandle.write`, which traps on `EPIPE` in swift-corelibs-foundation, is never used for them.
enum Console {
    /// Makes a closed pipe an error code instead of a signal that kills the process.
    static func ignoreBrokenPipes() {
        signal(SIGPIPE, SIG_IGN)
    }

    /// Writes text to stdout. - Returns: `false` once stdout is closed (nothing more reaches it).
    @discardableResult
    static func output(_ text: String) -> Bool {
        write(text, to: STDOUT_FILENO)
    }

    /// Writes bytes to stdout (`dl -O -`). - Returns: `false` once stdout is closed.
    static func output(bytes: UnsafeRawBufferPointer) -> Bool {
        write(bytes, to: STDOUT_FILENO)
    }

    /// Writes text to stderr (lost, silently, when stderr is closed).
    static func error(_ text: String) {
        write(text, to: STDERR_FILENO)
    }

    @discardableResult
    private static func write(_ text: String, to fd: Int32) -> Bool {
        Array(text.utf8).withUnsafeBytes { write($0, to: fd) }
    }

    /// Writes every byte, going on after interruptions. - Returns: `false` when the descriptor is closed.
    @discardableResult
    static func write(_ buffer: UnsafeRawBufferPointer, to fd: Int32) -> Bool {
        guard var pointer = buffer.baseAddress else { return true }
        var remaining = buffer.count
        while remaining > 0 {
            #if canImport(Glibc)
                let written = Glibc.write(fd, pointer, remaining)
            #else
                let written = Darwin.write(fd, pointer, remaining)
            #endif
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return false }
            pointer += written
            remaining -= written
        }
        return true
    }
}

extension DownloadError {
    /// The reason as `dl` says it: with the `dl` flags that help when a server or a proxy wants a login.
    var dlReason: String {
        switch statusCode {
        case 401:
            return reason
                + "; the server wants a login, which dl never saves: give it again with --user NAME and "
                + "--password-file FILE, --ask-password or DL_PASSWORD, or a line in ~/.netrc (--netrc-file)"
        case 407:
            return reason
                + "; the proxy wants a login: give it in http_proxy or https_proxy (http://USER:PASSWORD@HOST:PORT)"
        default:
            // The library's words for a rerun that contradicts what an unfinished download holds.
            if self == .conflictingOptions { return reason + " (dl --list shows what holds for it)" }
            return reason
        }
    }
}
