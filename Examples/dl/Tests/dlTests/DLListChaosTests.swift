import Downloader
import Foundation
import HTTPTestServer
import Testing

/// Seeded kills during `dl -i` runs (issue #34): lists of random length and shape, each run killed with SIGKILL after a
/// random number of finished files and with a random read-ahead (so that the reading waits, saves its position and
/// the next run wraps round the list), then a last run to the end. `DL_LIST_CHAOS_SEED` and `DL_LIST_CHAOS_TRIALS`
/// replay a run or make a longer one.
@Suite("dl list chaos")
final class DLListChaosTests: Sendable, DLFileChecks {
    let workspace: TestWorkspace
    var server: HTTPTestServer { workspace.server }
    var work: URL { workspace.directory }

    init() throws {
        workspace = try TestWorkspace(prefix: "dl-list-chaos")
    }

    @Test("Kills at random during a list: every file right at the end, none fetched after it was delivered, each once")
    func seededKills() async throws {
        let trials = SeededTrials(
            "list chaos", variables: ("DL_LIST_CHAOS_SEED", "DL_LIST_CHAOS_TRIALS"), seed: 34, count: 3)
        let seed = trials.seed
        var random = trials.generator
        var (runs, positioned) = (0, 0)
        for trial in 0..<trials.count {
            let (problems, started) = try await run(trial: "\(seed)-\(trial)", using: &random)
            #expect(problems.isEmpty, "seed \(seed) trial \(trial): \(problems.joined(separator: "; "))")
            runs += started.count
            positioned += started.filter { $0 }.count
        }
        print("list chaos: \(runs) runs, \(positioned) of them began at a saved position")
    }

    /// One trial: a list, one to three killed runs, a last run.
    /// - Returns: what broke, and for each run whether it began with a saved position.
    private func run(
        trial: String, using random: inout SeededGenerator
    ) async throws -> (problems: [String], positioned: [Bool]) {
        let count = Int.random(in: 40...240, using: &random)
        var sizes: [String: Int] = [:]
        var list = ""
        for index in 0..<count {
            let name = "l\(trial)-\(index)"
            sizes[name] = Int.random(in: 1000...40000, using: &random)
            if Int.random(in: 0..<6, using: &random) == 0 { list += "# a comment\n\n" }
            list += server.url("/bytes/\(name)?size=\(sizes[name]!)").absoluteString + "\n"
            if Bool.random(using: &random) { list += "  out=\(name)\n" }
        }
        if Bool.random(using: &random) { list.removeLast() }  // no final newline
        let listFile = work.appendingPathComponent("list-\(trial).txt")
        try list.write(to: listFile, atomically: true, encoding: .utf8)
        let dir = work.appendingPathComponent("out-\(trial)")
        let active = String(Int.random(in: 1...4, using: &random))
        let log = work.appendingPathComponent("results-\(trial).jsonl")
        let arguments = ["--dir", dir.path, "-q", "-j", active, "--result-log", log.path, "-i", listFile.path]

        var problems: [String] = []
        var delivered: [String: Int] = [:]  // file name → the run that printed it
        var runStarts: [Int] = []
        var positioned: [Bool] = []
        let kills = Int.random(in: 1...3, using: &random)
        for run in 0...kills {
            runStarts.append(server.requests.count)
            let position = dir.appendingPathComponent(".dl/list-position").path
            positioned.append(FileManager.default.fileExists(atPath: position))
            let inFlight = [1, 2, 3, 5, 8, 1000].randomElement(using: &random)!
            let process = try DLProcess(arguments, in: work, environment: ["DL_IN_FLIGHT": String(inFlight)])
            if run < kills {
                _ = await process.waitForStdout(lines: Int.random(in: 1...count / 2, using: &random))
                process.send(SIGKILL)
            }
            let outcome = await process.wait()
            for line in outcome.lines {
                let name = URL(fileURLWithPath: line).lastPathComponent
                if delivered[name] == nil { delivered[name] = run }
            }
            if run == kills {
                if outcome.status != 0 {
                    problems.append("last run exit \(outcome.status): \(outcome.stderr.suffix(300))")
                }
                if outcome.lines.count != count {
                    problems.append("last run printed \(outcome.lines.count) of \(count)")
                }
            } else if ![0, 137].contains(outcome.status) {
                problems.append("run \(run) exit \(outcome.status): \(outcome.stderr.suffix(300))")
            }
        }
        let requests = server.requests
        for (name, run) in delivered where run + 1 < runStarts.count {
            let later = requests[runStarts[run + 1]...].filter { $0.method == "GET" && $0.path == "/bytes/\(name)" }
            if !later.isEmpty { problems.append("\(name), delivered in run \(run), fetched again \(later.count)×") }
        }
        for (name, size) in sizes where (try? md5(dir.appendingPathComponent(name))) != content(name, size) {
            problems.append("\(name) is wrong at the end")
        }
        if FileManager.default.fileExists(atPath: dir.appendingPathComponent(".dl").path) {
            // What was left says which part did not finish (a CI run once left it, and replays did not).
            let left = (try? FileManager.default.contentsOfDirectory(atPath: dir.appendingPathComponent(".dl").path))
            problems.append("the state folder was left, holding \(left?.sorted() ?? [])")
        }
        // However many runs were killed: one result line per URL (issue #48).
        let logged = ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n")
        if logged.count != count {
            // Which URLs have more than one line, and those lines: what a failure has to say.
            var byURL: [String: [Substring]] = [:]
            for line in logged {
                let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                byURL[object?["url"] as? String ?? "(not a result line)", default: []].append(line)
            }
            let repeated = byURL.filter { $0.value.count > 1 }.flatMap(\.value)
            problems.append("the result log has \(logged.count) lines for \(count) URLs: \(repeated)")
        }
        return (problems, positioned)
    }
}
