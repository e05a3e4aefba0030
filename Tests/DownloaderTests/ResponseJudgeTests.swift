import Foundation
import Testing

@testable import Downloader

/// The response judge, rule by rule, without a socket.
@Suite("Response judge")
struct ResponseJudgeTests {
    let url = URL(string: "http://example.com/file.bin")!
    let sha = SHA256.hash(data: Data("the whole file".utf8))
    let md5 = MD5.hash(data: Data("some bytes".utf8))
    var md5Checksum: Checksum { Checksum(algorithm: .md5, digest: md5.bytes)! }
    var shaChecksum: Checksum { Checksum(algorithm: .sha256, digest: sha.bytes)! }

    func head(
        _ status: Int, range: String? = nil, etag: String? = "\"v1\"", length: Int64? = nil, encoding: String? = nil
    ) -> ResponseHead {
        ResponseHead(
            statusCode: status, contentRange: range, validators: Validators(etag: etag), contentEncoding: encoding,
            contentLength: length)
    }

    func window(from start: Int64 = 0, to end: Int64? = 65_535, windowSize: Int64 = 8 << 20) -> WindowRequest {
        WindowRequest(start: start, end: end, ranged: true, resumeOffset: start, windowSize: windowSize)
    }

    func known(etag: String? = "\"v1\"", total: Int64? = 100_000) -> ResourceMetadata {
        var metadata = ResourceMetadata()
        metadata.validators = Validators(etag: etag)
        metadata.totalLength = total
        return metadata
    }

    func judge(_ head: ResponseHead, _ request: WindowRequest, _ known: ResourceMetadata = .init())
        -> ResponseVerdict
    {
        ResponseJudge.judge(head, request: request, known: known, url: url)
    }

    /// The error of a failed verdict, or `nil`.
    func failure(_ verdict: ResponseVerdict) -> DownloadError? {
        if case .end(.failed(let error)) = verdict { return error }
        return nil
    }

    func restarts(_ verdict: ResponseVerdict) -> Bool {
        if case .end(.restartFromZero) = verdict { return true }
        return false
    }

    @Test("A 206 from byte 0 defines the version: validators, length, name, checksums; a small file saves no state")
    func partialFromZero() throws {
        var response = head(206, range: "bytes 0-65535/100000", etag: "\"v2\"")
        response.dispositionFilename = "report.pdf"
        response.reprDigest = "sha-256=:\(sha.base64String):"
        response.contentMD5 = md5.base64String  // describes this part only: ignored
        var before = known(etag: "\"v1\"", total: nil)
        before.announced = [md5Checksum]
        guard case .begin(let metadata, let length, let checkpoint) = judge(response, window(), before) else {
            Issue.record("expected begin")
            return
        }
        #expect(metadata.validators.etag == "\"v2\"" && metadata.totalLength == 100_000)
        #expect(metadata.suggestedFilename == "report.pdf" && metadata.announced == [shaChecksum])
        #expect(length == 65_536 && !checkpoint)

        // Larger than 1 MiB, or larger than one normal window: the version is saved at once.
        let large = judge(head(206, range: "bytes 0-65535/5000000"), window())
        let wide = judge(head(206, range: "bytes 0-16383/100000"), window(to: 16_383, windowSize: 65_536))
        for verdict in [large, wide] {
            guard case .begin(_, _, let checkpoint) = verdict else {
                Issue.record("expected begin")
                continue
            }
            #expect(checkpoint)
        }
        // The whole file in one 206: its Content-MD5 is the file's.
        var whole = head(206, range: "bytes 0-99/100")
        whole.contentMD5 = md5.base64String
        guard case .begin(let metadata, _, _) = judge(whole, window()) else {
            Issue.record("expected begin")
            return
        }
        #expect(metadata.announced == [md5Checksum])
    }

    @Test(
        "A 206 continuing the file keeps its version; another version or length restarts; a lone other ETag is unreliable"
    )
    func partialContinuation() {
        let request = window(from: 65_536, to: 131_071)
        guard
            case .append(let metadata, let length) = judge(
                head(206, range: "bytes 65536-99999/100000"), request, known())
        else {
            Issue.record("expected append")
            return
        }
        #expect(length == 34_464 && metadata.totalLength == 100_000 && metadata.validators.etag == "\"v1\"")
        // Another ETag with the same length and no other sign of a change: backends that disagree (issue #23).
        guard
            case .end(.unreliableETag) = judge(
                head(206, range: "bytes 65536-99999/100000", etag: "\"v2\""), request, known())
        else {
            Issue.record("expected unreliableETag")
            return
        }
        // Another ETag and another Last-Modified: a new version.
        var dated = head(206, range: "bytes 65536-99999/100000", etag: "\"v2\"")
        dated.validators.lastModified = "Tue, 24 Nov 2026 10:00:00 GMT"
        var knownDated = known()
        knownDated.validators.lastModified = "Mon, 23 Nov 2026 10:00:00 GMT"
        #expect(restarts(judge(dated, request, knownDated)))
        // Once the ETag proved unreliable it is ignored: the same length continues.
        var ignoring = known(etag: nil)
        ignoring.ignoresETag = true
        guard
            case .append(let kept, _) = judge(
                head(206, range: "bytes 65536-99999/100000", etag: "\"v3\""), request, ignoring)
        else {
            Issue.record("expected append while ignoring the ETag")
            return
        }
        #expect(kept.validators.etag == nil)
        #expect(restarts(judge(head(206, range: "bytes 65536-131071/200000"), request, known())))
        // Unknown validators never count as a change; the first ones seen are kept.
        guard
            case .append(let learnt, _) = judge(head(206, range: "bytes 65536-99999/100000"), request, known(etag: nil))
        else {
            Issue.record("expected append")
            return
        }
        #expect(learnt.validators.etag == "\"v1\"")
    }

    @Test(
        "A 206 that does not answer its request fails: no Content-Range, another start, too long, unasked; encoded: whole"
    )
    func partialMismatch() {
        let request = window(from: 65_536, to: 131_071)
        let cases = [
            judge(head(206), request, known()),
            judge(head(206, range: "bytes 65000-99999/100000"), request, known()),
            judge(head(206, range: "bytes 65536-140000/200000"), request, known()),
            judge(
                head(206, range: "bytes 0-99/100"),
                WindowRequest(start: 0, end: nil, ranged: false, resumeOffset: 0, windowSize: 8 << 20)),
        ]
        for verdict in cases {
            #expect(failure(verdict) == DownloadError.invalidResponse(url, reason: ""))
        }
        // An encoded 206 cannot be placed (URLSession decodes it): the resource is fetched whole instead.
        guard
            case .end(.wholeWithoutRanges) = judge(
                head(206, range: "bytes 65536-99999/100000", encoding: "gzip"), request, known())
        else {
            Issue.record("expected wholeWithoutRanges")
            return
        }
    }

    @Test("A 200 replaces the file from byte 0; to a ranged request for the same version it means no Range support")
    func whole() {
        let resume = window(from: 65_536, to: 131_071)
        guard case .replace(let same, let length, let checkpoint) = judge(head(200, length: 5_000_000), resume, known())
        else {
            Issue.record("expected replace")
            return
        }
        #expect(!same.rangesSupported && same.totalLength == 5_000_000 && length == 5_000_000 && checkpoint)

        guard case .replace(let changed, _, let small) = judge(head(200, etag: "\"v2\"", length: 1000), resume, known())
        else {
            Issue.record("expected replace")
            return
        }
        #expect(changed.rangesSupported && changed.validators.etag == "\"v2\"" && !small)

        guard case .replace(let encoded, let unknown, _) = judge(head(200, length: 300, encoding: "gzip"), window())
        else {
            Issue.record("expected replace")
            return
        }
        #expect(!encoded.rangesSupported && encoded.totalLength == nil && unknown == nil)
    }

    @Test("A 416 tells the complete length; another status fails with its Retry-After")
    func otherStatuses() {
        guard case .end(.unsatisfiable(let complete)) = judge(head(416, range: "bytes */100000"), window()) else {
            Issue.record("expected unsatisfiable")
            return
        }
        #expect(complete == 100_000)
        var busy = head(503)
        busy.retryAfter = 7
        let error = failure(judge(busy, window()))
        #expect(error == DownloadError.httpStatus(503, url: url) && error?.statusCode == 503 && error?.retryAfter == 7)
        #expect(failure(judge(head(404), window()))?.statusCode == 404)
    }
}
