import Foundation
import Testing

@testable import dl

/// `dl`'s malloc arena limit: one arena while every URL runs at once (a large file's flat memory), glibc's default for
/// a list (small files' CPU), and the user's own limit when the environment sets one.
@Suite("dl malloc arenas")
struct MallocArenasTests {
    let urls = (0..<6).map { "http://127.0.0.1:1/f\($0)" }

    func limit(_ arguments: [String], environment: [String: String] = [:]) throws -> Int32? {
        MallocArenas.limit(for: try Arguments.parse(arguments), environment: environment)
    }

    /// A list file in a fresh folder with `count` of the URLs.
    func listFile(_ count: Int) throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("arenas-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.appendingPathComponent("list.txt")
        try urls.prefix(count).joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    @Test("Every URL at once gets one arena; more URLs than --max-active runs is a list")
    func commandLine() throws {
        #expect(try limit([urls[0]]) == 1)
        #expect(try limit(Array(urls.prefix(4))) == 1)  // --max-active is 4 by default
        #expect(try limit(Array(urls.prefix(5))) == nil)
        #expect(try limit(["-j", "8"] + Array(urls.prefix(5))) == 1)
        #expect(try limit(["-j", "2", "-x4"] + Array(urls.prefix(3))) == nil)
    }

    @Test("A list file keeps glibc's arenas; a list of one URL is that URL")
    func inputFile() throws {
        let two = try listFile(2)
        let one = try listFile(1)
        defer {
            for path in [two, one] {
                try? FileManager.default.removeItem(at: URL(fileURLWithPath: path).deletingLastPathComponent())
            }
        }
        #expect(try limit(["-i", two]) == nil)
        #expect(try limit(["-j", "16", "-i", two]) == nil)
        #expect(try limit(["-i", one]) == 1)
    }

    @Test("A limit in the environment is the user's: dl sets none")
    func environment() throws {
        #expect(try limit([urls[0]], environment: ["MALLOC_ARENA_MAX": "4"]) == nil)
        #expect(try limit([urls[0]], environment: ["GLIBC_TUNABLES": "glibc.malloc.arena_max=2"]) == nil)
        #expect(try limit([urls[0]], environment: ["GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"]) == 1)
    }
}

#if os(Linux)
    import HTTPTestServer

    /// The arena limit in a running `dl`: glibc's per-thread arenas are 64 MiB-aligned mappings of their own
    /// (`/proc/PID/maps`), which one arena never makes.
    @Suite("dl malloc arenas in a run")
    final class MallocArenasRunTests: Sendable {
        let workspace: TestWorkspace
        var server: HTTPTestServer { workspace.server }
        var work: URL { workspace.directory }

        init() throws {
            workspace = try TestWorkspace(prefix: "dl-arenas")
        }

        /// The heaps of glibc's other arenas in a process: anonymous read-write mappings at a 64 MiB boundary that,
        /// with the reserved rest after them, span exactly 64 MiB (`HEAP_MAX_SIZE`).
        static func arenaHeaps(of pid: Int32) throws -> Int {
            let size: UInt64 = 64 << 20
            let regions = try String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8).split(separator: "\n")
                .map { line -> (start: UInt64, end: UInt64, writable: Bool, anonymous: Bool) in
                    let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                    let bounds = fields[0].split(separator: "-").map { UInt64($0, radix: 16) ?? 0 }
                    return (bounds[0], bounds[1], fields[1] == "rw-p", fields.count < 6)
                }
            var heaps = 0
            for (index, region) in regions.enumerated()
            where region.writable && region.anonymous && region.start % size == 0 {
                var end = region.end
                var next = index + 1
                while end < region.start + size, next < regions.count, regions[next].start == end,
                    regions[next].anonymous
                {
                    end = regions[next].end
                    next += 1
                }
                if end == region.start + size { heaps += 1 }
            }
            return heaps
        }

        /// Runs `dl` on `arguments` whose URLs stall at the gate `gate` after 64 KiB, and counts the arena heaps
        /// while `stalls` responses are held there.
        func heaps(_ arguments: [String], gate: String, stalls: Int) async throws -> Int {
            let before = server.statistics.stallsBegun
            let process = try DLProcess(["-q", "--dir", work.appendingPathComponent(gate).path] + arguments, in: work)
            let held = await server.waitUntil(timeout: .seconds(60)) { $0.stallsBegun >= before + stalls }
            let heaps = try Self.arenaHeaps(of: process.pid)
            server.openGate(gate)
            let outcome = await process.wait()
            #expect(held && outcome.status == 0, "\(outcome.stderr)")
            return heaps
        }

        func url(_ name: String, gate: String) -> String {
            server.url("/bytes/\(name)?size=\(1 << 20)&stallAfter=\(64 << 10)&stallGate=\(gate)").absoluteString
        }

        @Test("One URL runs with one arena; a list with glibc's arenas")
        func limitApplies() async throws {
            #expect(try await heaps([url("one", gate: "one")], gate: "one", stalls: 1) == 0)
            let list = work.appendingPathComponent("list.txt")
            try [url("a", gate: "list"), url("b", gate: "list")].joined(separator: "\n")
                .write(to: list, atomically: true, encoding: .utf8)
            let listHeaps = try await heaps(["-i", list.path], gate: "list", stalls: 2)
            #expect(listHeaps >= 2, "\(listHeaps) arena heaps while a list ran")
        }
    }
#endif
