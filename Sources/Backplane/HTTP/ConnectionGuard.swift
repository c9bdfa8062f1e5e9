import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import BackplaneWire

/// Limits of the HTTP transport, applied to every connection before any route sees it.
public struct TransportLimits: Sendable, Equatable {
    /// Largest request head (request line and all header fields); a larger one is answered
    /// `431 Request Header Fields Too Large` and the connection is closed.
    public var maxHeaderBytes: Int
    /// Most header fields in one request (431 above).
    public var maxHeaderFields: Int
    /// How long a connection may go without a complete request head: after it opens, and after
    /// each response while it is kept alive. Slow or idle clients are disconnected then.
    public var requestHeadTimeout: Duration
    /// How long a request's body may take to arrive once its head has.
    public var requestBodyTimeout: Duration
    /// Open connections per process (WebSocket channels included). Past it, new connections wait
    /// in the listen backlog until one closes.
    public var maxConnections: Int

    public init(
        maxHeaderBytes: Int = 16 * 1024, maxHeaderFields: Int = 100, requestHeadTimeout: Duration = .seconds(30),
        requestBodyTimeout: Duration = .seconds(60), maxConnections: Int = 4096
    ) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxHeaderFields = maxHeaderFields
        self.requestHeadTimeout = requestHeadTimeout
        self.requestBodyTimeout = requestBodyTimeout
        self.maxConnections = maxConnections
    }
}

/// Per connection: closes it when a request head or body takes too long, answers a head the
/// decoder refuses (431 for too large, 400 otherwise) instead of leaving the client hanging, and
/// replaces the empty 400 of a refused WebSocket upgrade with the refusal's status and error body.
/// Leaves the pipeline once the connection becomes a WebSocket (channels are pinged instead).
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// Sent by `UpgradeRequestFilter`, in front of the upgrade handler, when the first request's
    /// head arrives: the guard only sees that head once the upgrade handler lets it through,
    /// which for an upgrade request is after the router's decision (signature and store checks).
    struct RequestHeadArrived {}

    /// A refused upgrade's answer, recorded by `UpgradeRefusalMiddleware`.
    struct Refusal: Sendable {
        var status: HTTPResponse.Status
        var headers: HTTPFields
        var body: ByteBuffer
    }

    private let limits: TransportLimits
    /// When the connection is late (nil: it is not waiting on the client). Moved on every request
    /// head and answer; the timer is not, which spares every request scheduling and cancelling
    /// one twice. It fires at or before `deadline` and then looks again.
    private var deadline: NIODeadline?
    private var timer: (task: Scheduled<Void>, at: NIODeadline)?
    /// Requests whose head was read and whose answer has not ended: while one is being worked on
    /// nothing is late, however long the route takes.
    private var unanswered = 0
    /// A request's body is still arriving (its head was read, its end not yet).
    private var readingBody = false
    private var responding = false
    private var refusal: Refusal?
    private var refusalBody: ByteBuffer?
    private var quiesceRequested = false

    init(limits: TransportLimits) {
        self.limits = limits
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context, limits.requestHeadTimeout) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopTimer()
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context, limits.requestHeadTimeout)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopTimer()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            unanswered += 1
            readingBody = true
            rearm(context)
        case .end:
            readingBody = false
            rearm(context)
        case .body:
            // The whole body has one deadline, set at its head: a trickle does not move it.
            break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head):
            responding = true
            if let refusal, head.status == .badRequest {
                // Hummingbird's answer to a refused upgrade: empty, always 400. Send the refusal.
                head.status = .init(statusCode: Int(refusal.status.code), reasonPhrase: refusal.status.reasonPhrase)
                head.headers = HTTPHeaders(refusal.headers.map { ($0.name.rawName, $0.value) })
                head.headers.replaceOrAdd(name: "content-length", value: String(refusal.body.readableBytes))
                head.headers.replaceOrAdd(name: "connection", value: "close")
                refusalBody = refusal.body
                self.refusal = nil
            }
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .end(let trailers):
            responding = false
            if let body = refusalBody {
                refusalBody = nil
                context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            }
            context.write(wrapOutboundOut(.end(trailers)), promise: promise)
            unanswered = max(unanswered - 1, 0)
            rearm(context)
        case .body:
            context.write(data, promise: promise)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else { return context.fireErrorCaught(error) }
        disarm()
        // Mid-response there is no clean way to answer: just close.
        guard !responding else { return context.close(promise: nil) }
        let tooLarge = parserError == .headerOverflow
        let body = BackplaneError(
            tooLarge ? .requestHeaderFieldsTooLarge : .badRequest, tooLarge ? .headersTooLarge : .badRequest,
            tooLarge
                ? "The request head is larger than \(limits.maxHeaderBytes) bytes or has more than \(limits.maxHeaderFields) header fields."
                : "The request is not valid HTTP/1.1.")
        let bytes = body.encodedBody
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json; charset=utf-8")
        headers.add(name: "content-length", value: String(bytes.readableBytes))
        headers.add(name: "connection", value: "close")
        let head = HTTPResponseHead(
            version: .http1_1, status: tooLarge ? .requestHeaderFieldsTooLarge : .badRequest, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(bytes))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is RequestHeadArrived {
            // From now on the request is late only if its body is.
            return arm(context, limits.requestBodyTimeout)
        }
        if event is ChannelShouldQuiesceEvent {
            // The server is shutting down. An upgrade the router is still deciding has no
            // handler yet to act on this: it is told again once it is a channel.
            quiesceRequested = true
        }
        if event is HTTPServerUpgradeEvents {
            // A WebSocket from now on: leave before its first frame arrives. The handlers after
            // this one hear of the upgrade first (a removed handler passes nothing on).
            disarm()
            context.fireUserInboundEventTriggered(event)
            let pipeline = context.pipeline.syncOperations
            pipeline.removeHandler(context: context, promise: nil)
            if quiesceRequested { pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Called on the channel's event loop before the refused upgrade is answered.
    func record(_ refusal: Refusal) {
        self.refusal = refusal
    }

    /// The deadline for what the connection waits for now: the rest of a body, nothing while a
    /// request is being answered, else the next request's head. (An answer can end before its
    /// request's body does, say a 404 sent at once; the connection is idle once the body is in.)
    private func rearm(_ context: ChannelHandlerContext) {
        if readingBody {
            arm(context, limits.requestBodyTimeout)
        } else if unanswered > 0 {
            disarm()
        } else {
            arm(context, limits.requestHeadTimeout)
        }
    }

    private func arm(_ context: ChannelHandlerContext, _ timeout: Duration) {
        let deadline = context.eventLoop.now + TimeAmount(timeout)
        self.deadline = deadline
        // A timer due no later than the new deadline will look again when it fires.
        if let timer, timer.at <= deadline { return }
        schedule(at: deadline, channel: context.channel, on: context.eventLoop)
    }

    private func disarm() {
        deadline = nil
    }

    private func stopTimer() {
        deadline = nil
        timer?.task.cancel()
        timer = nil
    }

    private func schedule(at time: NIODeadline, channel: any Channel, on eventLoop: any EventLoop) {
        timer?.task.cancel()
        let handler = NIOLoopBound(self, eventLoop: eventLoop)
        let task = eventLoop.scheduleTask(deadline: time) { handler.value.timerFired(channel: channel, on: eventLoop) }
        timer = (task, time)
    }

    private func timerFired(channel: any Channel, on eventLoop: any EventLoop) {
        timer = nil
        guard let deadline else { return }
        if deadline <= eventLoop.now {
            // Too slow or idle: nothing useful can be said to a client that is not sending.
            channel.close(promise: nil)
        } else {
            schedule(at: deadline, channel: channel, on: eventLoop)
        }
    }
}

/// Outermost middleware of the WebSocket router: a channel request it refuses (bad signature,
/// unknown key, another device's channel) is recorded on the connection's `ConnectionGuard`,
/// which sends it in place of the upgrade's empty 400, so a failed upgrade answers like any other
/// request: the status and the error body.
struct UpgradeRefusalMiddleware: RouterMiddleware {
    typealias Context = BackplaneRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            var mapped = ErrorMiddleware<Context>.map(error, requestId: context.id)
            mapped.headers[ErrorMiddleware<Context>.requestIdHeader] = context.id
            var headers = mapped.headers
            headers[.contentType] = "application/json; charset=utf-8"
            let refusal = ConnectionGuard.Refusal(status: mapped.status, headers: headers, body: mapped.encodedBody)
            if let channel = context.channel {
                try? await channel.eventLoop.submit {
                    try channel.pipeline.syncOperations.handler(type: ConnectionGuard.self).record(refusal)
                }.get()
            }
            throw error
        }
    }
}
