import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import Testing
import TestSupport
import BackplaneWire
@testable import ClientSDK

/// A connection that closes under a request: the default transport says so, and the SDK signs the
/// request again and sends it again (up to `repeatsOnClosedConnection` times) where a repeat is safe.
@Suite struct ClosedConnectionTests {
    @Test func aKeptAliveConnectionClosedUnderARequestIsReportedAsClosed() async throws {
        let server = try await ClosingServer.start()
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        defer {
            _ = client.shutdown()
            server.channel.close(promise: nil)
        }
        let transport = HTTPClientTransport(client: client)
        let request = TransportRequest(
            method: "GET", url: URL(string: "http://127.0.0.1:\(server.port)/")!, headers: [], body: Data(), timeout: .seconds(10))

        #expect(try await transport.send(request).status == 200)
        // The same kept-alive connection; the server closes it on reading the request.
        await #expect(throws: ConnectionClosedError.self) { try await transport.send(request) }
        #expect(server.connections == 1, "both requests went out on one connection")
    }

    @Test func aSyncWhoseConnectionClosedIsSignedAgainAndAnswered() async throws {
        try await withEngine(closing: "/v1/sync", user: "olga") { engine, transport in
            // The backplane answered the first two; the answers were lost with their connections.
            transport.close(next: 2)

            let result = try await engine.sync()
            #expect(result.device.deviceId == (await engine.status.deviceId))
            let nonces = transport.nonces
            #expect(nonces.count == 3)
            #expect(Set(nonces).count == 3, "each repeat is signed again: the one before's nonce is spent")
        }
    }

    @Test func aConnectionThatKeepsClosingEndsInACommunicationsFailure() async throws {
        try await withEngine(closing: "/v1/sync", user: "oleg") { engine, transport in
            transport.close(next: 10)

            let error = await #expect(throws: BackplaneClientError.self) { try await engine.sync() }
            #expect(error?.kind == .communicationsFailure)
            #expect(transport.nonces.count == 1 + BackplaneAPI.repeatsOnClosedConnection)
        }
    }

    @Test func anUnsubscribeWhoseConnectionClosedIsNotRepeated() async throws {
        try await withEngine(closing: "/v1/subscriptions/news", user: "otto") { engine, transport in
            transport.close(next: 1)

            // A repeat of one that arrived would be answered 404, hiding that it worked.
            let error = await #expect(throws: BackplaneClientError.self) { try await engine.subscriptions.unsubscribe(feedId: "news") }
            #expect(error?.kind == .communicationsFailure)
            #expect(transport.nonces.count == 1)
        }
    }

    /// Runs `body` with a started engine whose requests to `path` go through a `ClosingTransport`,
    /// against an in-process backplane; shuts both down after.
    private func withEngine(
        closing path: String, user: String, _ body: (BackplaneEngine, ClosingTransport) async throws -> Void
    ) async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let transport = ClosingTransport(path: path)
        var configuration = server.configuration(user: user, dataDirectory: temporaryDirectory("sdk-\(user)"))
        configuration.transport = transport
        let engine = BackplaneEngine(configuration: configuration)
        try await engine.start()
        try await body(engine, transport)
        await engine.shutdown()
    }
}

/// Sends requests to `path` for real; after `close(next: n)`, the next `n` answers are dropped and
/// `ConnectionClosedError` thrown, as when a connection closes after the request went out.
private final class ClosingTransport: Transport {
    let inner = HTTPClientTransport()
    let path: String
    private let state = LockedBox((closing: 0, nonces: [String]()))

    init(path: String) {
        self.path = path
    }

    func close(next count: Int) { state.withLock { $0 = (count, []) } }
    var nonces: [String] { state.withLock { $0.nonces } }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        guard request.url.path == path else { return try await inner.send(request) }
        let close = state.withLock { state in
            state.nonces.append(request.headers.first { $0.name == RequestSigning.Header.nonce }?.value ?? "")
            defer { state.closing = max(state.closing - 1, 0) }
            return state.closing > 0
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
    private let accepted: LockedBox<Int>

    var port: Int { channel.localAddress?.port ?? 0 }
    var connections: Int { accepted.withLock { $0 } }

    private init(channel: any Channel, accepted: LockedBox<Int>) {
        self.channel = channel
        self.accepted = accepted
    }

    static func start() async throws -> ClosingServer {
        let accepted = LockedBox(0)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                accepted.withLock { $0 += 1 }
                return channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(AnswerOnce()) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return ClosingServer(channel: channel, accepted: accepted)
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
