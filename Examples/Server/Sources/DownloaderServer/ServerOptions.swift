import Foundation

/// `downloader-server --port N --dir DIR [--rpc-secret TOKEN]`, and the rest of its command line.
struct ServerOptions {
    var port = 6800
    var host = "127.0.0.1"
    var directory = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
    var secret: String?
    var maximumActiveDownloads = 4
    var continuesInterrupted = true
    var allowsEveryOrigin = false

    static let usage = """
        usage: downloader-server --port N --dir DIR [--rpc-secret TOKEN] [OPTION]...

        Downloads into DIR, driven by aria2's JSON-RPC (POST /jsonrpc) and shown on a page at /.
        Stops gracefully on SIGTERM or SIGINT: downloads are suspended and saved, and continue at the next start.

        Options:
          --port N                     listen on port N (default 6800, aria2's; 0 picks a free one)
          --host ADDRESS               listen on ADDRESS (default 127.0.0.1; 0.0.0.0 for every interface)
          --dir DIR                    where files land; its state lives in DIR/.downloader (default: here)
          --rpc-secret TOKEN           every RPC call must pass "token:TOKEN" first (aria2's --rpc-secret); the
                                       page then needs it too: open /#token=TOKEN
          --rpc-allow-origin-all       let web pages of any origin call (CORS); by default a request that a page
                                       of another origin makes is refused, so a site cannot drive the service
          -j, --max-concurrent-downloads N
                                       downloads at once (default 4; aria2.changeGlobalOption changes it)
          --no-continue                leave downloads a stop interrupted paused at start (default: continue)
          -h, --help                   print this and exit
        """

    /// Reads the command line.
    /// - Throws: a sentence for the user when an option is unknown or lacks its value.
    static func parse(_ arguments: [String]) throws(UsageError) -> ServerOptions? {
        var options = ServerOptions()
        var rest = arguments[...]
        func value(_ name: String) throws(UsageError) -> String {
            guard let value = rest.popFirst() else { throw UsageError("\(name) needs a value") }
            return value
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "-h", "--help": return nil
            case "--port":
                let text = try value(argument)
                guard let port = Int(text), (0...65535).contains(port) else {
                    throw UsageError("--port takes a number from 0 to 65535, not \(text)")
                }
                options.port = port
            case "--host": options.host = try value(argument)
            case "--dir": options.directory = URL(fileURLWithPath: try value(argument)).standardizedFileURL
            case "--rpc-secret": options.secret = try value(argument)
            case "-j", "--max-concurrent-downloads":
                let text = try value(argument)
                guard let count = Int(text), count >= 1 else { throw UsageError("\(argument) takes a positive number") }
                options.maximumActiveDownloads = count
            case "--no-continue": options.continuesInterrupted = false
            case "--rpc-allow-origin-all": options.allowsEveryOrigin = true
            default: throw UsageError("unknown option \(argument)")
            }
        }
        return options
    }
}

/// A command line that cannot be used, with the sentence that says why.
struct UsageError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}
