import Downloader
import Foundation
import Testing

@testable import dl

/// `dl`'s command line read in process (swift-argument-parser, then `Arguments`' checks): the spellings people type
/// by habit, and the mistakes that must exit 2 with a message.
@Suite("dl arguments")
struct ArgumentsTests {
    let url = "http://127.0.0.1:1/a"

    func parse(_ arguments: [String]) throws(UsageError) -> Arguments {
        try Arguments.parse(arguments)
    }

    func message(_ arguments: [String]) -> String? {
        do {
            _ = try parse(arguments)
            return nil
        } catch {
            return error.message
        }
    }

    @Test("Joined short options and aliases: -x4, -j8, -Pdir, -ddir, -Ofile, -s, --split, -t, --tries=0")
    func joinedAndAliases() throws {
        let joined = try parse(["-x4", "-j8", "-Pfolder", "-T2.5", "-HX-A: b", url])
        #expect(joined.connections == 4 && joined.maximumActive == 8 && joined.directory == "folder")
        #expect(joined.directoryGiven && joined.timeout == 2.5 && joined.headers == ["X-A": "b"])
        #expect(try parse(["-dd2", url]).directory == "d2")
        #expect(try parse(["-Ofile.iso", url]).output == "file.iso")
        #expect(try parse(["-s", "3", url]).connections == 3 && parse(["--split=5", url]).connections == 5)
        #expect(try parse(["--max-concurrent-downloads", "2", url]).maximumActive == 2)
        #expect(try parse(["--directory-prefix", "p", url]).directory == "p")
        #expect(try parse(["-t", "2", url]).retries == 1 && parse(["--tries=0", url]).retries == Int.max)
        #expect(try parse(["--retries", "0", url]).retries == 0)
        #expect(try parse(["-qc", url]).quiet)
        #expect(try parse(["--max-overall-download-limit", "2M", url]).overallLimit == 2 << 20)
        #expect(try parse(["--http-user", "u", "--http-password", "p", url]).password == "p")
    }

    @Test("-O - is the one URL to stdout; -- ends the options; URLs and options mix")
    func stdoutAndOrder() throws {
        let streamed = try parse(["-O", "-", url])
        #expect(streamed.output == "-" && streamed.requests.map(\.url.absoluteString) == [url])
        let mixed = try parse([url, "-q", "http://127.0.0.1:1/b", "--", "http://127.0.0.1:1/c"])
        #expect(mixed.quiet && mixed.requests.count == 3)
        #expect(try parse(["-h"]).help && parse(["--help"]).help && parse(["-V"]).showVersion)
    }

    @Test(
        "Mistakes are usage errors that say what is wrong",
        arguments: [
            (["--limt-rate", "1M", "http://127.0.0.1:1/a"], "Did you mean '--limit-rate'?"),
            (["--dir=", "http://127.0.0.1:1/a"], "--dir needs a value, not an empty one"),
            (["--dir", " ", "http://127.0.0.1:1/a"], "--dir needs a value, not an empty one"),
            (["-s", "http://127.0.0.1:1/a"], "-s is aria2c's --split; for quiet use -q"),
            (["-x17", "http://127.0.0.1:1/a"], "from 1 to 16"),
            (["--lifo=yes", "http://127.0.0.1:1/a"], "--lifo"),
            (["--version=2"], "--version"),
            (["-O"], "Missing value"),
            (["-t", "2", "--retries", "1", "http://127.0.0.1:1/a"], "give one"),
            (["--md5", "xyz", "http://127.0.0.1:1/a"], "32 hexadecimal digits"),
            (["--naming", "weird", "http://127.0.0.1:1/a"], "suggested or md5"),
            (["-o", "../x", "http://127.0.0.1:1/a"], "inside the folder"),
            ([], "no URL given"),
        ])
    func mistakes(arguments: [String], expected: String) {
        let text = message(arguments)
        #expect(text?.contains(expected) == true, "\(arguments): \(text ?? "parsed")")
    }

    @Test("A far-off flag gets no suggestion")
    func noSuggestion() {
        let text = message(["--frobnicate", url])
        #expect(text?.contains("Unknown option") == true && text?.contains("Did you mean") == false, "\(text ?? "")")
    }

    @Test("--help holds every group, every flag and what follows them")
    func help() {
        let usage = Arguments.usage
        for text in [
            "STARTUP:", "DOWNLOAD:", "VERIFICATION:", "OUTPUT:", "ENVIRONMENT:", "Exit status", "-x, -s",
            "--max-connection-per-server", "-O -", "--on-download-complete", "-V, --version", "-h, --help",
            "DL_STOP_DEADLINE",
        ] {
            #expect(usage.contains(text), "\(text) is missing from --help")
        }
    }

    @Test("DL_STOP_DEADLINE sets the clean stop's seconds; unset, empty, zero, negative or not a number is 4 s")
    func stopDeadline() {
        #expect(SignalHandler.stopDeadline(environment: [:]) == 4)
        #expect(SignalHandler.stopDeadline(environment: ["DL_STOP_DEADLINE": "60"]) == 60)
        #expect(SignalHandler.stopDeadline(environment: ["DL_STOP_DEADLINE": "0.5"]) == 0.5)
        for bad in ["", "0", "-3", "soon", "inf", "nan"] {
            #expect(SignalHandler.stopDeadline(environment: ["DL_STOP_DEADLINE": bad]) == 4, "\(bad)")
        }
    }
}
