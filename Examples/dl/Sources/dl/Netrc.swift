import Downloader
import Foundation

/// A `.netrc` file, as curl, wget and aria2c read it: `machine HOST login USER password PASSWORD` entries (tokens
/// separated by any white space, on one line or several), `default` for any other host, `macdef NAME` blocks skipped
/// up to the next empty line, `#` comments. Quoted tokens (`"a b"`, with `\"` and `\\`) as in curl 7.84 and later.
struct Netrc {
    /// The login of one machine (or of `default`, whose `host` is `nil`).
    struct Entry: Equatable {
        var host: String?
        var login: String?
        var password: String?
    }

    private(set) var entries: [Entry] = []

    /// Parses a file's text.
    init(parsing text: String) {
        var tokens = Self.tokens(text)[...]
        var current: Entry?
        func finish() {
            if let entry = current { entries.append(entry) }
            current = nil
        }
        while let token = tokens.popFirst() {
            switch token {
            case "machine":
                finish()
                current = Entry(host: tokens.popFirst()?.lowercased())
            case "default":
                finish()
                current = Entry(host: nil)
            case "login":
                current?.login = tokens.popFirst()
            case "password":
                current?.password = tokens.popFirst()
            case "account":
                _ = tokens.popFirst()
            case "macdef":
                finish()
                _ = tokens.popFirst()
                while let next = tokens.first, next != "\n\n" { tokens.removeFirst() }
            default:
                break  // "\n\n" markers and unknown tokens
            }
        }
        finish()
    }

    /// The login for `host`: its `machine` entry, else `default`; one with a login and a password only.
    func credential(for host: String) -> DownloadCredential? {
        let host = host.lowercased()
        let entry = entries.first { $0.host == host } ?? entries.first { $0.host == nil }
        guard let entry, let login = entry.login, let password = entry.password else { return nil }
        return DownloadCredential(user: login, password: password)
    }

    /// The file's tokens, with `"\n\n"` where an empty line ends a `macdef`.
    private static func tokens(_ text: String) -> [String] {
        var tokens: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.trimmingCharacters(in: .whitespaces).isEmpty {
                tokens.append("\n\n")
                continue
            }
            var characters = line[...]
            while let first = characters.first {
                if first == " " || first == "\t" || first == "\r" {
                    characters.removeFirst()
                } else if first == "#" {
                    break
                } else if first == "\"" {
                    characters.removeFirst()
                    var token = ""
                    while let next = characters.popFirst(), next != "\"" {
                        if next == "\\", let escaped = characters.popFirst() {
                            token.append(escaped)
                        } else {
                            token.append(next)
                        }
                    }
                    tokens.append(token)
                } else {
                    let token = characters.prefix { $0 != " " && $0 != "\t" && $0 != "\r" }
                    characters.removeFirst(token.count)
                    tokens.append(String(token))
                }
            }
        }
        return tokens
    }
}

extension Arguments {
    /// Fills `credentials` for the hosts of the URLs and their mirrors: `--user`/`--password` for each (an empty
    /// password without `--password`), else the `.netrc` entry of the host or its `default`. The `.netrc` is
    /// `--netrc-file`, else `~/.netrc` when it exists.
    /// - Throws: `UsageError` when `--netrc-file` cannot be read.
    mutating func collectCredentials() throws(UsageError) {
        if let user, password == nil {
            // --password-file, --ask-password, else DL_PASSWORD (else empty, as curl and wget take it).
            if let passwordFile {
                password = try Secrets.password(inFile: passwordFile)
            } else if asksPassword {
                password = try Secrets.askPassword(for: user, stdinIsTaken: input?.readsStandardInput ?? false)
            } else if let fromEnvironment = ProcessInfo.processInfo.environment["DL_PASSWORD"] {
                password = fromEnvironment
            }
        }
        var netrc: Netrc?
        if let netrcFile {
            guard let data = FileManager.default.contents(atPath: netrcFile) else {
                throw UsageError(message: "--netrc-file: cannot read \(netrcFile)")
            }
            netrc = Netrc(parsing: String(decoding: data, as: UTF8.self))
        } else if readsNetrc, user == nil {
            let home = ProcessInfo.processInfo.environment["HOME"] ?? NSHomeDirectory()
            if let data = FileManager.default.contents(atPath: home + "/.netrc") {
                netrc = Netrc(parsing: String(decoding: data, as: UTF8.self))
            }
        }
        let urls = requests.flatMap { [$0.url] + $0.mirrors }
        if let user {
            // As curl: for the origins (scheme, host, port) of the URLs given, never another port after a redirect.
            for url in urls {
                guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { continue }
                let port = url.port ?? (scheme == "https" ? 443 : 80)
                credentials["\(scheme)://\(host):\(port)"] = DownloadCredential(user: user, password: password ?? "")
            }
            return
        }
        // A .netrc machine is a host name: its login goes to any port of it.
        for host in Set(urls.compactMap { $0.host?.lowercased() }) {
            if let credential = netrc?.credential(for: host) { credentials[host] = credential }
        }
    }
}
