import NIOCore
import NIOHTTP1

/// Drops the `Upgrade` header from a connection's first request unless that request is a
/// complete WebSocket handshake, so the request is answered as plain HTTP/1.1.
///
/// Why: NIO's upgrade handler loses the request head when a request asks for an upgrade that no
/// upgrader takes (`Upgrade: h2c` from `curl --http2`, `Upgrade: websocket` without
/// `Sec-WebSocket-Key`, any unknown protocol): the connection then closes without an answer.
/// RFC 9110 §7.8 lets a server ignore `Upgrade`, which is what this does; when the request also
/// said `Connection: upgrade` the connection closes after the answer. Only the first request
/// can start an upgrade (the upgrade handler leaves the pipeline after it), so the filter leaves
/// with it.
final class UpgradeRequestFilter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data) else {
            return context.fireChannelRead(data)
        }
        // The upgrade handler holds an upgrade request back from `ConnectionGuard` until the
        // router has decided on it; the head has arrived all the same, so its timer must stop.
        context.fireUserInboundEventTriggered(ConnectionGuard.RequestHeadArrived())
        if head.headers.contains(name: "upgrade"), !Self.isWebSocketHandshake(head.headers) {
            head.headers.remove(name: "upgrade")
            if head.headers[canonicalForm: "connection"].contains(where: { $0.lowercased() == "upgrade" }) {
                // The HTTP decoder took this for an upgrade and parses nothing after it: answer,
                // then close, rather than leave the client waiting on a second request.
                head.headers.replaceOrAdd(name: "connection", value: "close")
            }
            context.fireChannelRead(wrapInboundOut(.head(head)))
        } else {
            context.fireChannelRead(data)
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    /// Everything NIO's WebSocket upgrader requires before it consults the router.
    static func isWebSocketHandshake(_ headers: HTTPHeaders) -> Bool {
        headers[canonicalForm: "upgrade"].contains { $0.lowercased() == "websocket" }
            && headers[canonicalForm: "connection"].contains { $0.lowercased() == "upgrade" }
            && headers.contains(name: "sec-websocket-key")
            && headers.contains(name: "sec-websocket-version")
    }

    /// Puts a filter in front of the upgrade handler that `GuardedHTTPChannel` set up.
    static func install(in pipeline: ChannelPipeline.SynchronousOperations) throws {
        let upgradeHandler = try pipeline.handler(type: NIOTypedHTTPServerUpgradeHandler<GuardedHTTPChannel.UpgradeResult>.self)
        try pipeline.addHandler(UpgradeRequestFilter(), position: .before(upgradeHandler))
    }
}
