import Foundation
import Testing

@testable import Downloader

/// The one rule for "still the version the partial file holds?" (`ResourceMetadata.compare`), which a resume's HEAD and
/// every continuation meet (issue #33).
@Suite("Resource version")
struct ResourceMetadataVersionTests {
    static let date = "Tue, 14 Nov 2023 22:13:20 GMT"

    static func known(etag: String? = "\"v-a\"", date: String? = date, length: Int64? = 1000) -> ResourceMetadata {
        var metadata = ResourceMetadata()
        metadata.validators = Validators(etag: etag, lastModified: date)
        metadata.totalLength = length
        return metadata
    }

    @Test("The same validators and length are the same version; unknown ones never count as a change")
    func same() {
        let known = Self.known()
        #expect(known.compare(Validators(etag: "\"v-a\"", lastModified: Self.date), completeLength: 1000) == .same)
        #expect(known.compare(Validators(), completeLength: nil) == .same)
        #expect(Self.known(etag: nil).compare(Validators(etag: "\"x\""), completeLength: 1000) == .same)
    }

    @Test("A weak ETag followed by the same tag, strong, is the same version; strong then weak is not")
    func weakThenStrong() {
        // RFC 9110 §8.8.3.2: the weak comparison of W/"v-a" and "v-a" matches. Apache marks the ETag of a file written
        // within the second weak, and the same tag strong a moment later.
        let weak = Self.known(etag: "W/\"v-a\"")
        func answer(_ etag: String) -> Validators { Validators(etag: etag, lastModified: Self.date) }
        #expect(weak.compare(answer("\"v-a\""), completeLength: 1000) == .same)
        #expect(weak.compare(answer("W/\"v-a\""), completeLength: 1000) == .same)
        #expect(weak.compare(answer("\"v-b\""), completeLength: 1000) != .same)
        // The file's version was proved by a strong tag: a weak one says less, and it is not taken as the same.
        #expect(Self.known().compare(answer("W/\"v-a\""), completeLength: 1000) != .same)
    }

    @Test("Only the ETag differs, same length and date: backends that disagree, not a new version")
    func otherETag() {
        let verdict = Self.known().compare(Validators(etag: "\"v-b\"", lastModified: Self.date), completeLength: 1000)
        guard case .otherETag(let reason) = verdict else {
            Issue.record("\(verdict)")
            return
        }
        #expect(reason.contains("\"v-b\""))
        // Without a date on one side the length alone decides.
        #expect(
            Self.known(date: nil).compare(Validators(etag: "\"v-b\""), completeLength: 1000)
                != .changed(reason: "the resource changed (validators differ)"))
    }

    @Test("Another date, another length or an unknown length with another ETag is another version")
    func changed() {
        let known = Self.known()
        let otherDate = known.compare(
            Validators(etag: "\"v-b\"", lastModified: "Wed, 15 Nov 2023 22:13:20 GMT"), completeLength: 1000)
        #expect(otherDate == .changed(reason: "the resource changed (validators differ)"))
        #expect(
            known.compare(Validators(etag: "\"v-b\"", lastModified: Self.date), completeLength: 999)
                == .changed(reason: "the resource changed (validators differ)"))
        #expect(
            known.compare(Validators(etag: "\"v-b\"", lastModified: Self.date), completeLength: nil)
                == .changed(reason: "the resource changed (validators differ)"))
        #expect(
            known.compare(Validators(etag: "\"v-a\"", lastModified: Self.date), completeLength: 999)
                == .changed(reason: "the resource's length changed from 1000 to 999"))
    }

    @Test("Once ETags are ignored, only the date and length decide, and the machine continues on one connection")
    func ignoredETags() {
        var known = Self.known()
        known.ignoreETags()
        #expect(known.validators.etag == nil && known.ignoresETag)
        let answer = Validators(etag: "\"v-c\"", lastModified: Self.date).ignoringETag(known.ignoresETag)
        #expect(known.compare(answer, completeLength: 1000) == .same)
        var position = TransferPosition()
        position.resume(at: 500)
        position.metadata = known
        let machine = Transfer.StateMachine(
            url: URL(string: "http://127.0.0.1/f")!, settings: .init(Transfer.Configuration(), limitedWindowSize: nil),
            position: position, connections: 4, connectionPrimed: true)
        #expect(machine.connections == 1)
    }

    @Test("A saved state keeps whether the server's ETags proved unreliable; older states read as trusted")
    func savedState() throws {
        let url = URL(string: "http://127.0.0.1/f")!
        let state = PartialState(
            url: url, hashedLength: 0, hash: nil, validators: Validators(lastModified: Self.date), totalLength: 1000,
            rangesSupported: true, ignoresETag: true)
        let data = try JSONEncoder().encode(state)
        #expect(try JSONDecoder().decode(PartialState.self, from: data).ignoresETag)
        var trusted = state
        trusted.ignoresETag = false
        let old = try JSONEncoder().encode(trusted)
        #expect(String(decoding: old, as: UTF8.self).contains("ignoresETag") == false)
        #expect(try JSONDecoder().decode(PartialState.self, from: old).ignoresETag == false)
    }
}
