import Downloader
import Foundation

/// A command line that cannot be run; `dl` exits with status 2.
struct UsageError: Error {
    let message: String
}

/// The parsed command line of `dl`.
struct Arguments {
    static let usage = """
        usage: dl [--dir DIR] [--max-active N] [--lifo] [--md5 HEX | --checksum ALG=HEX] [--checksum-file FILE
                  [--checksum-optional]] [--header 'Name: value']... [--retries N] [--naming suggested|md5]
                  [--quiet] [--no-md5] [--wait] URL...
               dl --list [--dir DIR]

        Downloads every URL into DIR (default ./downloads), several at once, resumably: run the same command again
        after Ctrl-C, kill or a network fault and it continues where it stopped. Each verified file's absolute path
        is printed on stdout; progress and messages go to stderr.

          --dir DIR          where files and download state live (default ./downloads)
          --max-active N     downloads at once (default 4)
          --lifo             start the most recently listed waiting URL first
          --md5 HEX          expected MD5 of the file (one URL only)
          --checksum ALG=HEX expected checksum (one URL): sha-256=…, sha256:…, sha-1=…, md5=…, or bare hex
          --checksum-file F  check each URL against the line for its file name in F, the output of sha256sum,
                             sha1sum or md5sum (or their --tag form); a URL without a line is an error
          --checksum-optional  with --checksum-file: URLs without a line are downloaded unchecked
          --no-md5           do not hash files (faster; only their length is checked)
          --header 'N: v'    an extra request header (repeatable)
          --retries N        retries of transient faults per URL (default 5)
          --naming MODE      suggested (server's or URL's name, default) or md5 (md5 of the URL)
          --quiet            no progress or messages (errors are still reported)
          --list             print the downloads known in DIR and exit
          --wait             if another dl is using DIR, wait for it instead of exiting 1

        Exit status: 0 all verified, 1 any failed, 2 usage error, 130 interrupted, 143 terminated.
        """

    var directory = "downloads"
    var maximumActive = 4
    var lifo = false
    var md5: String?
    /// `--checksum`: the expected checksum of the one URL.
    var checksum: Checksum?
    /// `--checksum-file`: a list the URLs are checked against, by file name.
    var checksumFile: ChecksumFile?
    var checksumOptional = false
    var computesMD5 = true
    var headers: [String: String] = [:]
    var retries = 5
    var naming: FileNaming = .suggested
    var quiet = false
    var list = false
    var wait = false
    var help = false
    var urls: [URL] = []

    /// Parses `dl`'s arguments (without the program name).
    /// - Throws: `UsageError` for unknown flags, missing or bad values, malformed URLs and unsupported schemes.
    static func parse(_ arguments: [String]) throws(UsageError) -> Arguments {
        var result = Arguments()
        var texts: [String] = []
        var index = 0
        var optionsEnded = false

        func value(for flag: String, inline: String?) throws(UsageError) -> String {
            if let inline { return inline }
            index += 1
            guard index < arguments.count else { throw UsageError(message: "\(flag) needs a value") }
            return arguments[index]
        }
        func integer(_ text: String, for flag: String, minimum: Int) throws(UsageError) -> Int {
            guard let number = Int(text), number >= minimum else {
                throw UsageError(message: "\(flag) needs a whole number of at least \(minimum), not \"\(text)\"")
            }
            return number
        }

        while index < arguments.count {
            let argument = arguments[index]
            if optionsEnded || !argument.hasPrefix("-") || argument == "-" {
                texts.append(argument)
                index += 1
                continue
            }
            let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
            let flag = parts[0]
            let inline = parts.count == 2 ? parts[1] : nil
            switch flag {
            case "--":
                optionsEnded = true
            case "--dir":
                result.directory = try value(for: flag, inline: inline)
                guard !result.directory.isEmpty else { throw UsageError(message: "--dir needs a directory") }
            case "--max-active":
                result.maximumActive = try integer(value(for: flag, inline: inline), for: flag, minimum: 1)
            case "--lifo":
                result.lifo = true
            case "--md5":
                let text = try value(for: flag, inline: inline)
                guard MD5Digest(hexString: text) != nil else {
                    throw UsageError(message: "--md5 needs 32 hexadecimal digits, not \"\(text)\"")
                }
                result.md5 = text
            case "--no-md5":
                result.computesMD5 = false
            case "--checksum":
                let text = try value(for: flag, inline: inline)
                do {
                    result.checksum = try Checksum(parsing: text)
                } catch {
                    throw UsageError(message: "--checksum: \(error.reason)")
                }
            case "--checksum-file":
                let path = try value(for: flag, inline: inline)
                let text: String
                do {
                    text =
                        path == "-"
                        ? String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
                        : try String(contentsOfFile: path, encoding: .utf8)
                } catch {
                    throw UsageError(message: "--checksum-file: cannot read \(path)")
                }
                result.checksumFile = try ChecksumFile(parsing: text)
            case "--checksum-optional":
                result.checksumOptional = true
            case "--header":
                let text = try value(for: flag, inline: inline)
                guard let colon = text.firstIndex(of: ":"), colon != text.startIndex else {
                    throw UsageError(message: "--header needs 'Name: value', not \"\(text)\"")
                }
                let name = text[..<colon].trimmingCharacters(in: .whitespaces)
                let headerValue = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                guard !name.isEmpty, !name.contains(" ") else {
                    throw UsageError(message: "--header has a bad name in \"\(text)\"")
                }
                result.headers[name] = headerValue
            case "--retries":
                result.retries = try integer(value(for: flag, inline: inline), for: flag, minimum: 0)
            case "--naming":
                switch try value(for: flag, inline: inline) {
                case "suggested": result.naming = .suggested
                case "md5": result.naming = .md5OfURL
                case let other: throw UsageError(message: "--naming is suggested or md5, not \"\(other)\"")
                }
            case "--quiet", "-q":
                result.quiet = true
            case "--list":
                result.list = true
            case "--wait":
                result.wait = true
            case "--help", "-h":
                result.help = true
            default:
                throw UsageError(message: "unknown option \(flag)")
            }
            index += 1
        }

        if result.help { return result }
        if result.list {
            guard texts.isEmpty else { throw UsageError(message: "--list takes no URLs") }
            return result
        }
        guard !texts.isEmpty else { throw UsageError(message: "no URL given") }
        var seen = Set<URL>()
        for text in texts {
            do {
                let url = try URL.download(text)
                if seen.insert(url).inserted { result.urls.append(url) }
            } catch {
                throw UsageError(message: "\(text): \(error.reason)")
            }
        }
        if let md5 = result.md5 {
            guard result.checksum == nil else { throw UsageError(message: "--md5 and --checksum: give one") }
            result.checksum = Checksum(md5: md5)
        }
        if result.checksum != nil && !result.computesMD5 {
            throw UsageError(message: "a checksum to verify and --no-md5 contradict each other")
        }
        if result.checksum != nil && result.urls.count != 1 {
            throw UsageError(message: "--checksum and --md5 apply to a single URL, but \(result.urls.count) were given")
        }
        if let list = result.checksumFile, !result.checksumOptional {
            for url in result.urls where list.checksum(for: url) == nil {
                throw UsageError(
                    message:
                        "no checksum for \(url.lastPathComponent) in the --checksum-file (--checksum-optional allows that)"
                )
            }
        }
        return result
    }
}
