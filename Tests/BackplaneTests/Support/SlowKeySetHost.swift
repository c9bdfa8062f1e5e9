import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization
import TestSupport

/// A key-set host that misbehaves, for the limits of key-set fetches: it accepts connections and
/// then either never says a word (`silent`, not even TLS) or answers a 200 head over TLS and
/// trickles its body a byte at a time (`trickling`), for as long as the connection stays open.
/// Counts the connections it accepted and those still open.
final class SlowKeySetHost: Sendable {
    enum Manner: Sendable {
        case silent
        case trickling(every: TimeAmount)
    }

    private let counts = Mutex((accepted: 0, open: 0))
    private let channel: any Channel
    let port: Int

    var accepted: Int { counts.withLock { $0.accepted } }
    var open: Int { counts.withLock { $0.open } }

    private init(channel: any Channel) {
        self.channel = channel
        self.port = channel.localAddress?.port ?? 0
    }

    static func start(_ manner: Manner, certificates: TestCertificates.Made) async throws -> SlowKeySetHost {
        let tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificates.certificate.path).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: certificates.privateKey.path, format: .pem)))
        let context = try NIOSSLContext(configuration: tls)
        let box = HostBox()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ConnectionCounter(host: box))
                    guard case .trickling(let every) = manner else { return }
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.addHandler(Trickler(every: every))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let host = SlowKeySetHost(channel: channel)
        box.host.withLock { $0 = host }
        return host
    }

    func stop() async {
        try? await channel.close()
    }

    /// Waits up to `seconds` for every connection to the host to be closed; the number still open.
    func openAfterWaiting(upTo seconds: Double) async -> Int {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while open > 0, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(50)) }
        return open
    }

    fileprivate func opened() { counts.withLock { $0.accepted += 1; $0.open += 1 } }
    fileprivate func closed() { counts.withLock { $0.open -= 1 } }
}

/// The host, set once it exists: the handlers are made before it is.
private final class HostBox: Sendable {
    let host = Mutex<SlowKeySetHost?>(nil)
}

private final class ConnectionCounter: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    private let host: HostBox

    init(host: HostBox) { self.host = host }

    func channelActive(context: ChannelHandlerContext) {
        host.host.withLock { $0 }?.opened()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        host.host.withLock { $0 }?.closed()
        context.fireChannelInactive()
    }
}

/// Once a request arrives: a 200 head promising a large JSON body, then one byte of it per tick.
private final class Trickler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private let every: TimeAmount
    private var started = false

    init(every: TimeAmount) { self.every = every }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !started else { return }
        started = true
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"keys\":["
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: head)), promise: nil)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.eventLoop.scheduleRepeatedTask(initialDelay: every, delay: every) { task in
            let context = loopBound.value
            guard context.channel.isActive else { return task.cancel() }
            context.writeAndFlush(NIOAny(ByteBuffer(string: " ")), promise: nil)
        }
    }
}
