import Downloader
import Foundation

/// Per-resource counters the scenarios use ("the first K requests", "changes every K requests").
struct ResourceCounters {
    /// Requests of any method so far.
    var all = 0
    /// GET requests so far.
    var gets = 0
    /// `dropAt` faults fired so far.
    var drops = 0
    /// Stalls (with `stallCount`) fired so far.
    var stalls = 0
    /// Connections closed before any response (`closeBeforeResponse`) so far.
    var aborts = 0
}

/// The routes. Every route is described in the README of this target; the options of `/bytes/NAME` combine.
enum Router {
    /// Chooses the response for a request.
    /// - Parameters:
    ///   - head: the request.
    ///   - port: the server's port, for absolute redirect locations.
    ///   - counters: bumps and returns the counters of the resource before this request.
    ///   - digest: the (cached) MD5 of some content.
    static func respond(
        to head: RequestHead,
        port: Int,
        counters: (String) -> ResourceCounters,
        digest: (TestContent) -> MD5Digest,
        fireDrop: (String) -> Int = { _ in 0 },
        fireStall: (String) -> Int = { _ in 0 },
        fireAbort: (String) -> Int = { _ in 0 }
    ) -> Response {
        var response = route(
            head, port: port, counters: counters, digest: digest, fireDrop: fireDrop, fireStall: fireStall,
            fireAbort: fireAbort)
        if head.method == "HEAD" {
            response.omitBody = true
            // headBody=1: body bytes follow the HEAD's answer (a server bug), once the next request has arrived.
            response.bytesAfterNextRequest = head.query["headBody"] == "1" ? Array("left by the HEAD\n".utf8) : nil
        }
        return response
    }

    private static func route(
        _ head: RequestHead,
        port: Int,
        counters: (String) -> ResourceCounters,
        digest: (TestContent) -> MD5Digest,
        fireDrop: (String) -> Int,
        fireStall: (String) -> Int,
        fireAbort: (String) -> Int
    ) -> Response {
        let components = head.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        let target = head.originTarget
        let query = target.contains("?") ? "?" + target.split(separator: "?", maxSplits: 1)[1] : ""
        guard head.method == "GET" || head.method == "HEAD" else {
            return .text(405, "method not allowed\n", headers: [("Allow", "GET, HEAD")])
        }
        // auth=USER:PASSWORD: without `Authorization: Basic base64(USER:PASSWORD)`, a 401 that offers Basic (or, with
        // authScheme=digest, only Digest).
        if let login = head.query["auth"],
            head.value("Authorization") != "Basic " + Data(login.utf8).base64EncodedString()
        {
            let challenge =
                head.query["authScheme"] == "digest"
                ? "Digest realm=\"test\", nonce=\"abc\", qop=\"auth\"" : "Basic realm=\"test, with a comma\""
            return .text(401, "log in first\n", headers: [("WWW-Authenticate", challenge)])
        }
        // cookieGate=NAME (a login or CDN gate): without the cookie NAME=open, a 302 to the same URL that sets it.
        if let gate = head.query["cookieGate"],
            !(head.value("Cookie") ?? "").split(separator: ";").contains(where: {
                $0.trimmingCharacters(in: .whitespaces) == "\(gate)=open"
            })
        {
            return .text(
                302, "set a cookie and come back\n",
                headers: [("Location", "http://127.0.0.1:\(port)\(target)"), ("Set-Cookie", "\(gate)=open; Path=/")])
        }
        switch components.first {
        case "bytes" where components.count == 2:
            return bytes(
                name: components[1], head: head, counters: counters(head.target), digest: digest,
                fireDrop: { fireDrop(head.target) }, fireStall: { fireStall(head.target) },
                fireAbort: { fireAbort(head.target) })
        case "status" where components.count == 2:
            let code = Int(components[1]) ?? 500
            var headers: [(String, String)] = []
            if let retryAfter = head.query["retryAfter"] { headers.append(("Retry-After", retryAfter)) }
            if head.query["body"] == "s3" {
                // What S3 answers for a presigned URL past its expiry.
                return .text(
                    code,
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code><Message>Request has "
                        + "expired</Message><X-Amz-Expires>60</X-Amz-Expires><RequestId>Q1</RequestId></Error>",
                    headers: headers + [("Content-Type", "application/xml")])
            }
            return .text(code, "status \(code)\n", headers: headers)
        case "redirect" where components.count >= 3:
            let remaining = Int(components[1]) ?? 0
            let rest = components.dropFirst(2).joined(separator: "/")
            let next = remaining <= 0 ? "/\(rest)\(query)" : "/redirect/\(remaining - 1)/\(rest)\(query)"
            return redirect(
                to: "http://127.0.0.1:\(port)\(next)", status: Int(head.query["redirectStatus"] ?? "") ?? 302)
        case "signed" where components.count >= 2:
            // A signed URL: each visit is redirected to the target with a new signature (sig=N, N counting visits).
            let rest = components.dropFirst().joined(separator: "/")
            let signature = counters(head.target).all
            let separator = query.isEmpty ? "?" : "&"
            return redirect(to: "http://127.0.0.1:\(port)/\(rest)\(query)\(separator)sig=\(signature)", status: 302)
        case "redirect-host" where components.count >= 2:
            let rest = components.dropFirst().joined(separator: "/")
            return redirect(to: "http://localhost:\(port)/\(rest)\(query)", status: 302)
        case "goto":
            // A redirect to exactly `to` (percent-decoded): another port, another scheme (file:, ftp:), anything.
            return redirect(to: head.query["to"] ?? "/", status: Int(head.query["redirectStatus"] ?? "") ?? 302)
        case "loop" where components.count == 2:
            let next = ((Int(components[1]) ?? 0) + 1) % 2
            return redirect(to: "http://127.0.0.1:\(port)/loop/\(next)", status: 302)
        case "echo":
            let lines =
                ["\(head.method) \(head.target) \(head.version)"] + head.headers.map { "\($0.name): \($0.value)" }
            return .text(200, lines.joined(separator: "\n") + "\n")
        default:
            return .text(404, "not found: \(head.path)\n")
        }
    }

    private static func redirect(to location: String, status: Int) -> Response {
        .text(status, "see \(location)\n", headers: [("Location", location)])
    }

    // MARK: - /bytes/NAME

    private static func bytes(
        name: String, head: RequestHead, counters: ResourceCounters, digest: (TestContent) -> MD5Digest,
        fireDrop: () -> Int, fireStall: () -> Int, fireAbort: () -> Int
    ) -> Response {
        let options = head.query
        func int(_ key: String) -> Int? { options[key].flatMap { Int($0) } }
        let isGet = head.method == "GET"

        // Status faults: the first `statusCount` requests (any method) get `status`.
        if let status = int("status"), counters.all < (int("statusCount") ?? Int.max) {
            var headers: [(String, String)] = []
            if let seconds = options["retryAfter"] { headers.append(("Retry-After", seconds)) }
            if let seconds = int("retryAfterDate") {
                headers.append(("Retry-After", httpDate(Date().addingTimeInterval(Double(seconds)))))
            }
            var response = Response.text(status, "status \(status)\n", headers: headers)
            if !isGet { response.omitBody = true }
            return response
        }

        // closeBeforeResponse=K: the first K requests (any method) get no response at all, just a closed connection.
        if let count = int("closeBeforeResponse"), fireAbort() < count {
            var response = Response(status: 0)
            response.abort = true
            return response
        }
        // notHTTP=K: the first K GETs get a line of text with no status line (libcurl: "Received HTTP/0.9"), then the
        // connection closes.
        if isGet, let count = int("notHTTP"), counters.gets < count {
            var response = Response(status: 0)
            response.raw = Array("too many connections\n".utf8)
            return response
        }
        // sig=N&sigUses=K: a signature is good for K GETs, then 403 (an expired signed URL).
        if options["sig"] != nil, let uses = int("sigUses"), isGet, counters.gets >= uses {
            return .text(403, "signature expired\n")
        }
        if options["nohead"] == "1" && !isGet {
            return .text(405, "HEAD not allowed here\n", headers: [("Allow", "GET")])
        }
        let size = max(0, int("size") ?? 1024)
        // Changing content: the version goes up every `change` GET requests; HEAD shows what the next GET serves.
        var version = int("change").map { $0 > 0 ? counters.gets / $0 : 0 } ?? 0
        if let at = int("changeAt"), counters.gets >= at { version += 1 }  // one change, from the N+1th GET on
        let content = TestContent(name: name, size: size, version: version)
        let honoursRange = options["norange"] == nil

        var headers: [(String, String)] = [("Content-Type", "application/octet-stream")]
        if honoursRange || options["norange"] == "lie" { headers.append(("Accept-Ranges", "bytes")) }
        let etag: String? =
            switch options["etag"] {
            case "none": nil
            case "weak": "W/" + content.etag
            // Apache serving a file written the second it was first asked for: that GET's ETag is weak, later ones
            // are the same tag, strong.
            case "weakFirst": (counters.gets == 0 ? "W/" : "") + content.etag
            // Two backends behind one name: the same bytes, a different ETag on every other GET.
            case "flap": String(content.etag.dropLast()) + (counters.gets % 2 == 0 ? "-a\"" : "-b\"")
            // The same two backends, HEAD routed to the other one than GET.
            case "flapHead": String(content.etag.dropLast()) + (isGet ? "-a\"" : "-b\"")
            // Another server's ETag for the same bytes (a mirror that computes its own).
            case "other": String(content.etag.dropLast()) + "-mirror\""
            default: content.etag
            }
        if let etag { headers.append(("ETag", etag)) }
        // lastModified=now: a file written this second, as Apache serves it: Last-Modified equals Date, a weak
        // validator (RFC 9110 §8.8.2.2), which never satisfies If-Range.
        let modifiedNow = options["lastModified"] == "now"
        let lastModified = httpDate(modifiedNow ? Date() : content.lastModified)
        if options["lastModified"] != "none" { headers.append(("Last-Modified", lastModified)) }
        if modifiedNow { headers.append(("Date", lastModified)) }
        switch options["md5"] {
        case "1": headers.append(("Content-MD5", digest(content).base64String))
        case "bad": headers.append(("Content-MD5", MD5.hash(data: Array("not the content".utf8)).base64String))
        default: break
        }
        switch options["digest"] {
        case "1": headers.append(("Digest", "md5=\(digest(content).base64String)"))
        case "sha256": headers.append(("Digest", "SHA-256=\(content.sha256.base64String)"))
        default: break
        }
        // repr=1 / repr=bad: RFC 9530 Repr-Digest with the right / a wrong SHA-256 (and an unknown sha-512 first).
        switch options["repr"] {
        case "1": headers.append(("Repr-Digest", "sha-512=:AAAA:, sha-256=:\(content.sha256.base64String):"))
        case "bad": headers.append(("Repr-Digest", "sha-256=:\(SHA256.hash(data: Array("other".utf8)).base64String):"))
        default: break
        }
        if let filename = options["filename"] {
            headers.append(("Content-Disposition", "attachment; filename=\"\(filename)\""))
        }
        if let disposition = options["disposition"] { headers.append(("Content-Disposition", disposition)) }

        // encoding=stored: the file on disk is gzip (a .tar.gz) and the server labels it Content-Encoding: gzip, as
        // Apache's AddEncoding and nginx's gzip_static do: ranges are over the gzip bytes.
        if options["encoding"] == "stored" {
            return storedGzip(content, headers: headers, head: head, isGet: isGet)
        }
        // range416=1: every request with a Range gets 416, a plain GET the whole file.
        if options["range416"] == "1", head.value("Range") != nil {
            headers.append(("Content-Range", "bytes */\(size)"))
            return Response(status: 416, headers: headers)
        }

        var response: Response
        let acceptsGzip = head.value("Accept-Encoding")?.lowercased().contains("gzip") ?? false
        if options["gzip"] == "1" && acceptsGzip {
            headers.removeAll { $0.0 == "Accept-Ranges" }
            headers.append(("Content-Encoding", "gzip"))
            headers.append(("Vary", "Accept-Encoding"))
            response = Response(status: 200, headers: headers, body: .bytes(Gzip.encode(content.bytes(in: 0..<size))))
        } else if honoursRange, let rangeHeader = head.value("Range"),
            int("norangeFrom").map({ (rangeStart(rangeHeader) ?? 0) < $0 }) ?? true,
            options["etag"] == "flap"
                || ifRangeAllows(head.value("If-Range"), etag: etag, lastModified: modifiedNow ? nil : lastModified)
        {
            switch parseRange(rangeHeader, size: size) {
            case .satisfiable(let range):
                var start = range.lowerBound
                if let shift = int("contentRangeShift") { start += shift }
                let end = start + range.count - 1
                headers.append(("Content-Range", "bytes \(start)-\(end)/\(size)"))
                response = Response(status: 206, headers: headers, body: .content(content, range))
            case .unsatisfiable:
                headers.append(("Content-Range", "bytes */\(size)"))
                response = Response(status: 416, headers: headers)
            case .ignored:
                response = Response(status: 200, headers: headers, body: .content(content, 0..<size))
            }
        } else {
            response = Response(status: 200, headers: headers, body: .content(content, 0..<size))
        }

        if !isGet { response.omitBody = true }
        if let extra = int("lengthExtra") {
            response.announcedLength = response.body.count + extra
            response.closeAfter = true
        }
        // length=none: no Content-Length; the body ends when the connection closes.
        if options["length"] == "none" { response.omitLength = true }
        if isGet, let drop = int("drop"), counters.gets < (int("dropCount") ?? 1) {
            response.dropAfter = drop
        }
        // dropAt: close when the file offset reaches N, in the first `dropCount` responses (default 1) that cover it.
        if isGet, let dropAt = int("dropAt"), case .content(_, let range) = response.body,
            range.lowerBound <= dropAt, dropAt < range.upperBound || (dropAt == 0 && range.isEmpty)
        {
            if fireDrop() < (int("dropCount") ?? 1) { response.dropAfter = dropAt - range.lowerBound }
        }
        response.bytesPerSecond = int("rate").flatMap { $0 > 0 ? $0 : nil }
        // gate=G&gateSize=K: hold GET responses until K GET requests naming gate G have arrived (then it stays open).
        // gateFrom=N: only requests for a range starting at N or later wait at the gate.
        if isGet, let gate = options["gate"],
            int("gateFrom").map({ (head.value("Range").flatMap(rangeStart) ?? 0) >= $0 }) ?? true
        {
            response.gate = (gate, max(1, int("gateSize") ?? 1))
        }
        // headGate=G: hold HEAD responses at gate G (`gateSize`, default 1000: until the test opens it).
        if head.method == "HEAD", let gate = options["headGate"] {
            response.gate = (gate, max(1, int("gateSize") ?? 1000))
        }
        // stallAfter=N&stall=S: pause S seconds after N body bytes; with stallCount=K only the first K GETs stall. With
        // stallReached=1 a GET whose body ends before N (it could not stall) is not one of the K. With stallGate=G the
        // pause lasts until the test opens gate G (`openGate`; at most 30 s) instead.
        if isGet, let after = int("stallAfter"), options["stallReached"] != "1" || response.body.count > after,
            int("stallCount").map({ fireStall() < $0 }) ?? true
        {
            response.stall = (after, Double(options["stall"] ?? "") ?? 5)
            response.stallGate = options["stallGate"]
        }
        // trickleAfter=N: after N body bytes, 16 bytes every 10 ms (the rest of a large body takes hours).
        if isGet { response.trickleAfter = int("trickleAfter") }
        // paced=1: before each chunk of a GET's body, the server calls `beforeChunk` (see there).
        if isGet { response.paced = options["paced"] == "1" }
        // fast=1: the body from one block filled once, in 1 MiB writes (not the resource's bytes).
        if isGet { response.unfilled = options["fast"] == "1" }
        if options["nospace"] == "1" { response.headerSeparator = ":" }
        // manyHeaders=N: N more header lines; bigHeader=N: one header line with a value of N bytes.
        if let count = int("manyHeaders") {
            response.headers += (0..<count).map { ("X-Filler-\($0)", "value \($0)") }
        }
        if let length = int("bigHeader") { response.headers.append(("X-Big", String(repeating: "b", count: length))) }
        return response
    }

    /// A stored gzip file labelled `Content-Encoding: gzip`, with ranges over its bytes.
    private static func storedGzip(
        _ content: TestContent, headers: [(String, String)], head: RequestHead, isGet: Bool
    ) -> Response {
        let stored = Gzip.encode(content.bytes(in: 0..<content.size))
        var headers = headers
        headers.append(("Content-Encoding", "gzip"))
        var response = Response(status: 200, headers: headers, body: .bytes(stored))
        if let rangeHeader = head.value("Range"),
            case .satisfiable(let range) = parseRange(rangeHeader, size: stored.count)
        {
            headers.append(("Content-Range", "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(stored.count)"))
            response = Response(status: 206, headers: headers, body: .bytes(Array(stored[range])))
        }
        if !isGet { response.omitBody = true }
        return response
    }

    /// Whether an `If-Range` condition lets the range through (RFC 9110 §13.1.5: strong ETag or exact date; a weak
    /// date, `nil` here, matches nothing).
    private static func ifRangeAllows(_ ifRange: String?, etag: String?, lastModified: String?) -> Bool {
        guard let ifRange = ifRange?.trimmingCharacters(in: .whitespaces) else { return true }
        if ifRange.hasPrefix("\"") { return etag == ifRange }
        if ifRange.hasPrefix("W/") { return false }
        return ifRange == lastModified
    }

    enum RangeOutcome: Equatable {
        case satisfiable(Range<Int>)
        case unsatisfiable
        case ignored
    }

    /// Parses a single byte range (`a-`, `a-b`, `-n`); anything else is ignored, as RFC 9110 allows.
    /// The first byte of a `bytes=a-…` range header.
    static func rangeStart(_ header: String) -> Int? {
        guard header.hasPrefix("bytes=") else { return nil }
        return Int(header.dropFirst(6).prefix { $0 != "-" })
    }

    static func parseRange(_ header: String, size: Int) -> RangeOutcome {
        let value = header.trimmingCharacters(in: .whitespaces)
        guard value.lowercased().hasPrefix("bytes="), !value.contains(",") else { return .ignored }
        let spec = value.dropFirst(6).trimmingCharacters(in: .whitespaces)
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 else { return .ignored }
        if parts[0].isEmpty {
            guard let suffix = Int(parts[1]), suffix >= 0 else { return .ignored }
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .satisfiable(max(0, size - suffix)..<size)
        }
        guard let first = Int(parts[0]), first >= 0 else { return .ignored }
        let last: Int
        if parts[1].isEmpty {
            last = size - 1
        } else {
            guard let value = Int(parts[1]), value >= first else { return .ignored }
            last = min(value, size - 1)
        }
        guard first < size else { return .unsatisfiable }
        return .satisfiable(first..<(last + 1))
    }
}
