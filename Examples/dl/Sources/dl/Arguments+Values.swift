import Downloader
import Foundation

extension Arguments {
    /// The values of a parsed command line, each checked.
    /// - Throws: `UsageError` for an empty or bad value, or two flags that say the same thing differently.
    init(_ command: DLCommand) throws(UsageError) {
        self.init()
        let (startup, download, login) = (command.startup, command.download, command.login)
        let (limits, verification, output) = (command.limits, command.verification, command.output)
        showVersion = startup.version
        if let path = try Self.given(startup.inputFile, "--input-file") {
            input = try InputFeed(path: path, for: "--input-file")
        }
        if let folder = try Self.given(download.dir, "--dir") {
            directory = folder
            directoryGiven = true
        }
        self.output = try Self.given(download.output, "--output")  // "-": the verified stream to stdout
        if let name = try Self.given(download.out, "--out") {
            let components = name.split(separator: "/")
            guard !name.hasPrefix("/"), !components.contains(".."), !components.isEmpty else {
                throw UsageError(message: "-o/--out is a file name inside the folder (-O takes a path)")
            }
            outputName = name
        }
        if let text = try Self.given(download.maxActive, "--max-active") {
            maximumActive = try Self.integer(text, for: "--max-active", minimum: 1)
        }
        lifo = download.lifo
        switch try Self.given(download.naming, "--naming") {
        case nil, "suggested": naming = .suggested
        case "md5": naming = .md5OfURL
        case let other?: throw UsageError(message: "--naming is suggested or md5, not \"\(other)\"")
        }
        for text in download.header {
            let (name, value) = try Self.header(text, context: "--header")
            headers.setField(value, named: name)
        }
        if let agent = try Self.given(download.userAgent, "--user-agent") { userAgent = agent }
        if let text = try Self.given(download.connections, "--max-connection-per-server") {
            guard let count = Int(text), (1...16).contains(count) else {
                throw UsageError(
                    message: "-x/-s/--split needs a whole number of connections from 1 to 16, not \"\(text)\" "
                        + "(-s is aria2c's --split; for quiet use -q)")
            }
            connections = count
        }
        if let text = try Self.given(download.fileAllocation, "--file-allocation") {
            guard let allocation = FileAllocation(rawValue: text) else {
                throw UsageError(message: "--file-allocation takes none, prealloc or falloc, not \"\(text)\"")
            }
            fileAllocation = allocation
        }
        if let text = try Self.given(download.connectionsPerHost, "--max-connections-per-host") {
            guard let count = Int(text), count >= 1 else {
                throw UsageError(
                    message: "--max-connections-per-host needs a whole number of 1 or more, not \"\(text)\"")
            }
            connectionsPerHost = count
        }
        wait = download.wait

        user = try Self.given(login.user, "--user")
        password = try Self.given(login.password, "--password")
        passwordFile = try Self.given(login.passwordFile, "--password-file")
        asksPassword = login.askPassword
        netrcFile = try Self.given(login.netrcFile, "--netrc-file")
        readsNetrc = !login.noNetrc
        loadCookies = try Self.given(login.loadCookies, "--load-cookies")
        saveCookies = try Self.given(login.saveCookies, "--save-cookies")

        switch (try Self.given(limits.tries, "--tries"), try Self.given(limits.retries, "--retries")) {
        case (_?, _?):
            throw UsageError(message: "--tries and --retries: give one (-t counts attempts, --retries retries)")
        case (let text?, nil):
            // wget counts attempts, and 0 means no limit.
            let tries = try Self.integer(text, for: "--tries", minimum: 0)
            retries = tries == 0 ? Int.max : tries - 1
        case (nil, let text?):
            retries = try Self.integer(text, for: "--retries", minimum: 0)
        case (nil, nil):
            break
        }
        if let text = try Self.given(limits.timeout, "--timeout") {
            guard let seconds = Double(text), seconds > 0, seconds.isFinite else {
                throw UsageError(message: "--timeout needs a number of seconds above 0, not \"\(text)\"")
            }
            timeout = seconds
        }
        lowestSpeedLimit = try Self.given(limits.lowestSpeedLimit, "--lowest-speed-limit").map {
            text throws(UsageError) in try Self.rate(text, for: "--lowest-speed-limit")
        }
        limitRate = try Self.given(limits.limitRate, "--limit-rate").map { text throws(UsageError) in
            try Self.rate(text, for: "--limit-rate")
        }
        overallLimit = try Self.given(limits.overallLimit, "--max-overall-limit").map { text throws(UsageError) in
            try Self.rate(text, for: "--max-overall-limit")
        }

        if let text = try Self.given(verification.md5, "--md5") {
            guard Hashing.MD5Digest(hexString: text) != nil else {
                throw UsageError(message: "--md5 needs 32 hexadecimal digits, not \"\(text)\"")
            }
            md5 = text
        }
        if let text = try Self.given(verification.checksum, "--checksum") {
            do {
                checksum = try Checksum(parsing: text)
            } catch {
                throw UsageError(message: "--checksum: \(error.reason)")
            }
        }
        if let path = try Self.given(verification.checksumFile, "--checksum-file") {
            checksumFile = try ChecksumFile(parsing: Self.readText(path, for: "--checksum-file"))
        }
        checksumOptional = verification.checksumOptional
        computesChecksum = !verification.noMD5

        quiet = output.quiet
        onComplete = try Self.given(output.onComplete, "--on-complete")
        resultLog = try Self.given(output.resultLog, "--result-log")
        list = output.list
    }

    /// A flag's value, which must not be empty or blank (`nil`: the flag was not given).
    static func given(_ value: String?, _ flag: String) throws(UsageError) -> String? {
        guard let value else { return nil }
        guard !value.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw UsageError(message: "\(flag) needs a value, not an empty one")
        }
        return value
    }

    /// A whole number of at least `minimum`.
    static func integer(_ text: String, for flag: String, minimum: Int) throws(UsageError) -> Int {
        guard let number = Int(text), number >= minimum else {
            throw UsageError(message: "\(flag) needs a whole number of at least \(minimum), not \"\(text)\"")
        }
        return number
    }

    /// A rate in bytes per second as wget and aria2 write it: `2000`, `500k`, `2M`, `1.5m`, `1G` (k = 1024).
    static func rate(_ text: String, for flag: String) throws(UsageError) -> Int {
        let units: [Character: Double] = ["k": 1024, "m": 1024 * 1024, "g": 1024 * 1024 * 1024]
        var number = text.trimmingCharacters(in: .whitespaces)
        var multiplier = 1.0
        if let last = number.last?.lowercased().first, let unit = units[last] {
            multiplier = unit
            number.removeLast()
        }
        guard let value = Double(number), value.isFinite, value * multiplier >= 1, value * multiplier < 1e15 else {
            throw UsageError(message: "\(flag) needs a rate such as 500k or 2M (bytes per second), not \"\(text)\"")
        }
        return Int(value * multiplier)
    }

    /// `Name: value`, trimmed.
    static func header(_ text: String, context: String) throws(UsageError) -> (String, String) {
        guard let colon = text.firstIndex(of: ":"), colon != text.startIndex else {
            throw UsageError(message: "\(context) needs 'Name: value', not \"\(text)\"")
        }
        let name = text[..<colon].trimmingCharacters(in: .whitespaces)
        let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, !name.contains(" ") else {
            throw UsageError(message: "\(context) has a bad name in \"\(text)\"")
        }
        return (name, value)
    }

    /// A file's text, or standard input's for `-`.
    static func readText(_ path: String, for flag: String) throws(UsageError) -> String {
        if path == "-" { return String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self) }
        do {
            return try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw UsageError(message: "\(flag): cannot read \(path)")
        }
    }

    /// The name wget gives a URL's file: its last path component, or `index.html`.
    static func fileName(of url: URL) -> String {
        let last = url.lastPathComponent.removingPercentEncoding ?? url.lastPathComponent
        let name = last.replacingOccurrences(of: "/", with: "_")
        return name.isEmpty || name == "/" || name == "." || name == ".." ? "index.html" : name
    }
}

extension [String: String] {
    /// Sets a header field, replacing one of the same name in any letter case: HTTP's field names are, and two keys
    /// for one field would go out in the dictionary's order, which the process's hash seed decides.
    /// - Parameters:
    ///   - value: the field's value.
    ///   - name: its name as given.
    mutating func setField(_ value: String, named name: String) {
        let lowered = name.lowercased()
        for key in keys where key != name && key.lowercased() == lowered { removeValue(forKey: key) }
        self[name] = value
    }
}
