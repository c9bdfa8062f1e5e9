import NIOCore
import NIOHTTP1

/// One connection of the playback server, between NIO's HTTP/1.1 handlers and
/// `PlaybackHTTPHandler`: counts it under the server's cap (`PlaybackConnections`), marks it a
/// player's once a request under the run's token arrives, and closes it when it keeps the
/// server waiting for a request:
///
/// - a stranger's (no request under the token yet) must send a complete request within
///   `requestHeadTimeout` of opening and of the end of each answer. Its answers are short texts
///   (404, 421, 405), so its clock never stops: a stranger that sends requests and never reads
///   the answers is closed all the same.
/// - a player's may wait `idleTimeout` between requests, counted once an answer was written out
///   whole; while a request is being answered nothing is late, however long a paused player
///   takes to read a large file.
final class PlaybackConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let connections: PlaybackConnections
    private let options: PlaybackOptions
    private let token: String
    /// Set once the connection is counted.
    private var id: UInt64?
    private var isPlayers = false
    /// A player's requests whose answer is not written out yet.
    private var unanswered = 0
    /// When the connection is late (nil: it is not waiting on the client). Moved on every
    /// answer; the timer is not, which spares each request scheduling and cancelling one. The
    /// timer fires at or before `deadline` and then looks again.
    private var deadline: NIODeadline?
    private var timer: (task: Scheduled<Void>, at: NIODeadline)?
    private var isClosed = false

    init(connections: PlaybackConnections, options: PlaybackOptions, token: String) {
        self.connections = connections
        self.options = options
        self.token = token
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { opened(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        opened(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        closed()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            if !isPlayers, let id, PlaybackPath.carriesToken(head.uri, token: token),
               LoopbackHost(head, port: context.channel.localAddress?.port) == .accepted {
                isPlayers = true
                connections.prove(id)
            }
        case .body:
            break
        case .end:
            if isPlayers {
                unanswered += 1
                deadline = nil
            }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else { return context.write(data, promise: promise) }
        guard isPlayers else {
            arm(context.eventLoop, channel: context.channel, options.requestHeadTimeout)
            return context.write(data, promise: promise)
        }
        // A player's clock starts once the answer has left, not when its end was queued behind
        // a file the player is still reading.
        let written = promise ?? context.eventLoop.makePromise()
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loop = context.eventLoop, channel = context.channel
        written.futureResult.whenComplete { _ in handler.value.answered(loop, channel: channel) }
        context.write(data, promise: written)
    }

    private func answered(_ loop: any EventLoop, channel: any Channel) {
        unanswered = max(unanswered - 1, 0)
        if unanswered == 0 { arm(loop, channel: channel, options.idleTimeout) }
    }

    private func opened(_ context: ChannelHandlerContext) {
        guard id == nil else { return }
        id = connections.admit(context.channel)
        arm(context.eventLoop, channel: context.channel, options.requestHeadTimeout)
    }

    private func closed() {
        isClosed = true
        deadline = nil
        timer?.task.cancel()
        timer = nil
        if let id { connections.leave(id) }
    }

    private func arm(_ loop: any EventLoop, channel: any Channel, _ timeout: Duration) {
        guard !isClosed else { return }
        let deadline = loop.now + TimeAmount(timeout)
        self.deadline = deadline
        // A timer due no later than the new deadline will look again when it fires.
        if let timer, timer.at <= deadline { return }
        schedule(at: deadline, loop, channel: channel)
    }

    private func schedule(at time: NIODeadline, _ loop: any EventLoop, channel: any Channel) {
        timer?.task.cancel()
        let handler = NIOLoopBound(self, eventLoop: loop)
        let task = loop.scheduleTask(deadline: time) { handler.value.timerFired(loop, channel: channel) }
        timer = (task, time)
    }

    private func timerFired(_ loop: any EventLoop, channel: any Channel) {
        timer = nil
        guard let deadline else { return }
        if deadline <= loop.now {
            // Nothing useful can be said to a client that is not sending: it is just closed.
            channel.close(promise: nil)
        } else {
            schedule(at: deadline, loop, channel: channel)
        }
    }
}
