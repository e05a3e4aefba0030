import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore

/// Closes a connection whose first request head has not arrived whole within a deadline: a connection that sends
/// nothing, or trickles its header a byte at a time (slowloris), no longer holds a slot for ever.
///
/// It sits first in the pipeline, before the HTTP decoder, because the WebSocket-capable channel adds Hummingbird's
/// idle timeout only once the first request was decoded (whether it upgrades or not): until then nothing timed a
/// connection out. After the first head, that idle timeout (30 s without a read or a write) takes over, and on a
/// WebSocket the automatic ping.
final class FirstRequestDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let deadline: TimeAmount
    private var timer: Scheduled<Void>?
    /// How many bytes of `\r\n\r\n` (the head's end) the bytes so far end with.
    private var matched = 0
    /// Bytes read before the head ended: a head longer than the decoder takes is its to refuse.
    private var seen = 0

    init(deadline: TimeAmount) {
        self.deadline = deadline
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: deadline) {
            channel.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        let end: [UInt8] = [13, 10, 13, 10]
        for byte in buffer.readableBytesView {
            matched = byte == end[matched] ? matched + 1 : (byte == 13 ? 1 : 0)
            if matched == end.count { break }
        }
        seen += buffer.readableBytes
        context.fireChannelRead(data)
        if matched == end.count {
            timer?.cancel()
            timer = nil
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
    }
}

/// The HTTP/1 and WebSocket channel with `FirstRequestDeadline` in front.
struct DeadlinedUpgradeChannel: ServerChildChannel {
    typealias Value = HTTP1WebSocketUpgradeChannel.Value

    let inner: HTTP1WebSocketUpgradeChannel
    let deadline: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(FirstRequestDeadline(deadline: deadline))
        }.flatMap {
            inner.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/1 with WebSocket upgrades through `webSocketRouter`, each connection's first request head due within
    /// `firstRequestDeadline`.
    static func http1WebSocketUpgrade(
        webSocketRouter: Router<BasicWebSocketRequestContext>,
        configuration: HTTP1WebSocketUpgradeChannel.Configuration, firstRequestDeadline: Duration
    ) -> HTTPServerBuilder {
        let webSocketResponder = webSocketRouter.buildResponder()
        return HTTPServerBuilder { responder in
            DeadlinedUpgradeChannel(
                inner: HTTP1WebSocketUpgradeChannel(
                    responder: responder, webSocketResponder: webSocketResponder, configuration: configuration),
                deadline: .nanoseconds(
                    Int64(firstRequestDeadline.components.seconds) * 1_000_000_000
                        + firstRequestDeadline.components.attoseconds / 1_000_000_000))
        }
    }
}
