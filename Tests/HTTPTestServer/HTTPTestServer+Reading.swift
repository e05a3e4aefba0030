import Foundation

extension HTTPTestServer {
    /// Reads one request head, keeping any bytes after it in `buffer`. Request bodies are read and discarded.
    /// - Returns: `nil` at end of stream, on the idle timeout, on a malformed or oversized head, or when stopping.
    func readHead(_ fd: Int32, buffer: inout [UInt8]) -> RequestHead? {
        let terminator: [UInt8] = [13, 10, 13, 10]
        while true {
            if let end = buffer.firstRange(of: terminator) {
                let text = String(decoding: buffer[..<end.lowerBound], as: UTF8.self)
                buffer.removeSubrange(..<end.upperBound)
                guard var head = Self.parseHead(text) else { return nil }
                if let length = head.value("Content-Length").flatMap({ Int($0) }), length > 0 {
                    while buffer.count < length {
                        let more = Socket.receive(fd, capacity: 65_536)
                        if more.isEmpty { return nil }
                        buffer += more
                    }
                    buffer.removeFirst(length)
                }
                head.target = head.target.isEmpty ? "/" : head.target
                return head
            }
            guard buffer.count < 65_536, !isStopping else { return nil }
            let more = Socket.receive(fd, capacity: 65_536)
            if more.isEmpty { return nil }
            buffer += more
        }
    }

    static func parseHead(_ text: String) -> RequestHead? {
        let lines = text.components(separatedBy: "\r\n")
        let requestLine = lines[0].split(separator: " ").map(String.init)
        guard requestLine.count == 3 else { return nil }
        var headers: [HeaderField] = []
        for line in lines.dropFirst() where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            headers.append(
                HeaderField(
                    name: String(line[..<colon]),
                    value: line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        return RequestHead(method: requestLine[0], target: requestLine[1], version: requestLine[2], headers: headers)
    }
}
