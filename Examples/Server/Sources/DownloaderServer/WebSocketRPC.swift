import Aria2RPC
import Downloader
import Foundation
import HummingbirdWebSocket

/// aria2's JSON-RPC over a WebSocket at `/jsonrpc`: each text message is a request (or a batch) answered on the
/// socket, and the manager's events are pushed as aria2's notifications (`aria2.onDownloadStart`, …Pause, …Stop,
/// …Complete, …Error) while the socket is open. As with aria2c, notifications carry only GIDs and go to every
/// client the host and origin guard let in; calls need the token as over HTTP.
enum WebSocketRPC {
    /// Serves one socket until the client closes it.
    /// - Parameters:
    ///   - limit: the largest message read; a larger one closes the socket (`messageTooLarge`).
    static func serve(
        inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, session: Aria2Session, limit: Int
    ) async throws {
        let events = await session.manager.events()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in events {
                    guard let notification = Aria2Session.notification(for: event) else { continue }
                    try await outbound.write(.text(String(decoding: notification, as: UTF8.self)))
                }
            }
            for try await message in inbound.messages(maxSize: limit) {
                let body: Data
                switch message {
                case .text(let text): body = Data(text.utf8)
                case .binary(let buffer): body = Data(buffer.readableBytesView)
                }
                guard let reply = await session.reply(to: body) else { continue }
                try await outbound.write(.text(String(decoding: reply.body, as: UTF8.self)))
            }
            group.cancelAll()
        }
    }
}
