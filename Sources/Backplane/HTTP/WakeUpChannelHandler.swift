import NIOCore
import NIOHTTP1
import NIOWebSocket

/// A device's wake-up channel once its WebSocket upgrade is done: the last handler of the
/// connection's pipeline, after NIO's frame decoder and encoder.
///
/// Why a channel handler and not a task: an idle channel is most of a node's connections, and
/// a task per channel held its async frames (about 19 KiB each, measured with heaptrack) for as
/// long as the device stayed connected. Here an idle channel is its NIO objects and an entry in
/// the hub; pings are a timer on the channel's event loop.
///
/// What travels: the server sends the text frame `sync` once the channel is registered and on
/// every wake-up, and pings every `pingInterval`; a ping still unanswered at the next one closes
/// the channel. The device's pings are answered, its close frame is echoed, and anything else it
/// sends is read and dropped.
final class WakeUpChannelHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    static let wakeUpMessage = "sync"
    /// How long a closing channel waits for its close frame to be written before it hangs up
    /// anyway (a device that stopped reading would otherwise hold its connection for ever).
    static let closeTimeout = TimeAmount.seconds(10)
    private static let wakeUpBytes = ByteBuffer(string: wakeUpMessage)

    /// The hub's handle on one channel: writes from any thread, in the background.
    struct HubEntry: WakeUpChannel {
        let channel: any Channel

        func wake() {
            // A wake-up carries no data, so one waiting to be sent is as good as many: a device
            // that stops reading gets no more queued behind it.
            guard channel.isWritable else { return }
            channel.writeAndFlush(WakeUpChannelHandler.wakeUpFrame, promise: nil)
        }

        func close() {
            // Handled like the server's own quiescing: 1001, then the connection closes.
            channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        }
    }

    private static var wakeUpFrame: WebSocketFrame {
        WebSocketFrame(fin: true, opcode: .text, data: wakeUpBytes)
    }

    private let device: AuthenticatedDevice
    private let hub: WakeUpHub
    private let pingInterval: TimeAmount?
    private var registration: WakeUpHub.Registration?
    private var pings: RepeatedTask?
    private var awaitingPong = false
    private var closing = false

    init(device: AuthenticatedDevice, hub: WakeUpHub, pingInterval: TimeAmount?) {
        self.device = device
        self.hub = hub
        self.pingInterval = pingInterval
    }

    /// Once the upgrade is complete: the HTTP handlers (`ConnectionGuard` among them) have left
    /// the pipeline, so frames can be written.
    private func start(_ context: ChannelHandlerContext) {
        guard registration == nil, !closing, context.channel.isActive else { return }
        registration = hub.register(HubEntry(channel: context.channel), applicationId: device.applicationId, deviceId: device.deviceId)
        // The first wake-up says the channel is registered: a change committed between the
        // device's catch-up sync and this registration would otherwise wake nobody.
        context.writeAndFlush(wrapOutboundOut(Self.wakeUpFrame), promise: nil)
        if let pingInterval {
            let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
            pings = context.eventLoop.scheduleRepeatedTask(initialDelay: pingInterval, delay: pingInterval) { _ in
                loopBound.value.handler.ping(loopBound.value.context)
            }
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        leave()
    }

    func channelInactive(context: ChannelHandlerContext) {
        leave()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .ping:
            // NIO's decoder has refused fragmented or oversized control frames already. A
            // device that pings without reading gets no pongs queued behind the ones it has not
            // read (answering only some pings is allowed).
            guard !closing, context.channel.isWritable else { return }
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .pong:
            awaitingPong = false
        case .connectionClose:
            // Echo the device's status code, then hang up. No code is answered with none; a
            // code a peer may not send (RFC 6455 §7.4) with 1002.
            var data = frame.unmaskedData
            switch data.readInteger(as: UInt16.self) {
            case nil where data.readableBytes == 0: close(context, payload: ByteBuffer())
            case let code? where Self.isSendable(closeCode: code): close(context, code: WebSocketErrorCode(codeNumber: Int(code)))
            default: close(context, code: .protocolError)
            }
        default:
            break  // The device has nothing to say on this channel.
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is HTTPServerUpgradeEvents {
            // The HTTP handlers leave the pipeline as this event passes them: start writing
            // frames once they have.
            context.eventLoop.assumeIsolated().execute { self.start(context) }
            context.fireUserInboundEventTriggered(event)
        } else if case ChannelEvent.inputClosed = event {
            // The device hung up without a close frame (the server allows half-closed
            // connections, so this is not the end of the channel by itself).
            leave()
            context.close(promise: nil)
        } else if event is ChannelShouldQuiesceEvent {
            // The server is shutting down: say so, and let the device reconnect elsewhere.
            close(context, code: .goingAway)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // NIO's protocol error handler, before this one, has sent the close frame for a
        // malformed frame; any error ends the channel.
        leave()
        context.close(promise: nil)
    }

    private func ping(_ context: ChannelHandlerContext) {
        guard !closing else { return }
        guard !awaitingPong else { return close(context, code: .goingAway) }
        awaitingPong = true
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer())), promise: nil)
    }

    /// Close codes an endpoint may put in a close frame: 1000–1003, 1007–1014 and 3000–4999.
    private static func isSendable(closeCode code: UInt16) -> Bool {
        (1000...1003).contains(code) || (1007...1014).contains(code) || (3000...4999).contains(code)
    }

    private func close(_ context: ChannelHandlerContext, code: WebSocketErrorCode) {
        var payload = context.channel.allocator.buffer(capacity: 2)
        payload.write(webSocketErrorCode: code)
        close(context, payload: payload)
    }

    /// Sends the close frame, then closes the connection: the device has nothing more to send
    /// that the server would read.
    private func close(_ context: ChannelHandlerContext, payload: ByteBuffer) {
        guard !closing else { return }
        closing = true
        leave()
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: payload)))
            .whenComplete { _ in channel.close(promise: nil) }
        context.eventLoop.scheduleTask(in: Self.closeTimeout) { channel.close(promise: nil) }
    }

    private func leave() {
        pings?.cancel()
        pings = nil
        if let registration {
            hub.unregister(registration)
            self.registration = nil
        }
    }
}
