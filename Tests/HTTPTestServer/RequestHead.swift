import Downloader
import Foundation

/// The request as the router sees it.
struct RequestHead {
    var method: String
    var target: String
    var version: String
    var headers: [HeaderField]

    func value(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    var keepAlive: Bool {
        let connection = value("Connection")?.lowercased() ?? ""
        if version == "HTTP/1.0" { return connection.contains("keep-alive") }
        return !connection.contains("close")
    }

    /// The target in origin form: a request sent to a forward proxy names the whole URL (`GET http://host/path`), and
    /// the server then answers as the proxy would, with the origin's (deterministic) resource.
    var originTarget: String {
        guard target.hasPrefix("http://") else { return target }
        let rest = target.dropFirst("http://".count)
        guard let slash = rest.firstIndex(of: "/") else { return "/" }
        return String(rest[slash...])
    }

    var path: String { String(originTarget.split(separator: "?", maxSplits: 1).first ?? "") }

    /// The query's items, percent-decoded.
    var query: [String: String] {
        guard let items = URLComponents(string: "http://h\(originTarget)")?.queryItems else { return [:] }
        var result = [String: String]()
        for item in items where result[item.name] == nil { result[item.name] = item.value ?? "" }
        return result
    }
}
