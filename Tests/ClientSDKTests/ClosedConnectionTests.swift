import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import Testing
import TestSupport
import BackplaneWire
@testable import ClientSDK

/// A connection that closes under a request: the default transport says so, and the SDK signs the
/// request again and sends it once more.
@Suite struct ClosedConnectionTests {
    @Test func aKeptAliveConnectionClosedUnderARequestIsReportedAsClosed() async throws {
        let server = try await ClosingServer.start()
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { _ = client.shutdown() }
        let transport = HTTPClientTransport(client: client)
        let request = TransportRequest(
            method: "GET", url: URL(string: "http://127.0.0.1:\(server.port)/")!, headers: [], body: Data(), timeout: .seconds(10))

        #expect(try await transport.send(request).status == 200)
        // The same kept-alive connection; the server closes it on reading the request.
        await #expect(throws: ConnectionClosedError.self) { try await transport.send(request) }
        #expect(server.connections == 1, "both requests went out on one connection")
        try await server.stop()
    }

    @Test func aSyncWhoseConnectionClosedIsSignedAgainAndAnswered() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let transport = ClosingOnceTransport(path: "/v1/sync")
        var configuration = server.configuration(user: "olga", dataDirectory: temporaryDirectory("sdk-olga"))
        configuration.transport = transport
        let engine = BackplaneEngine(configuration: configuration)
        try await engine.start()
        transport.closeNext()

        // The backplane answered the first one; the answer was lost with the connection.
        let result = try await engine.sync()
        #expect(result.device.deviceId == (await engine.status.deviceId))
        let nonces = transport.nonces
        #expect(nonces.count == 2)
        #expect(Set(nonces).count == 2, "the second request is signed again: the first one's nonce is spent")
        await engine.shutdown()
    }
}

/// Sends requests to `path` for real; after `closeNext()`, the next one's answer is dropped and
/// `ConnectionClosedError` thrown, as when a connection closes after the request went out.
private final class ClosingOnceTransport: Transport {
    let inner = HTTPClientTransport()
    let path: String
    private let state = Mutex((closeNext: false, nonces: [String]()))

    init(path: String) {
        self.path = path
    }

    func closeNext() { state.withLock { $0 = (true, []) } }
    var nonces: [String] { state.withLock { $0.nonces } }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        guard request.url.path == path else { return try await inner.send(request) }
        let close = state.withLock { state in
            defer { state.closeNext = false }
            state.nonces.append(request.headers.first { $0.name == RequestSigning.Header.nonce }?.value ?? "")
            return state.closeNext
        }
        let response = try await inner.send(request)
        if close { throw ConnectionClosedError(underlying: ChannelError.eof) }
        return response
    }
}

/// An HTTP/1.1 server that answers the first request of each connection (kept alive) and closes
/// the connection when the next one arrives.
private final class ClosingServer: Sendable {
    let channel: any Channel
    private let accepted: Mutex<Int>

    var port: Int { channel.localAddress?.port ?? 0 }
    var connections: Int { accepted.withLock { $0 } }

    private init(channel: any Channel, accepted: Mutex<Int>) {
        self.channel = channel
        self.accepted = accepted
    }

    static func start() async throws -> ClosingServer {
        let accepted = Mutex(0)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                accepted.withLock { $0 += 1 }
                return channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(AnswerOnce()) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return ClosingServer(channel: channel, accepted: accepted)
    }

    func stop() async throws {
        try await channel.close()
    }

    private final class AnswerOnce: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        private var received = ""
        private var answered = false

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            received += String(buffer: unwrapInboundIn(data))
            guard let end = received.range(of: "\r\n\r\n") else { return }
            if answered {
                context.close(promise: nil)
                return
            }
            answered = true
            received = String(received[end.upperBound...])
            let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}"
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: answer)), promise: nil)
        }
    }
}
