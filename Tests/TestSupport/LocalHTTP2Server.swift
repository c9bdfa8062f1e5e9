import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// An HTTPS server that speaks HTTP/2 only (ALPN `h2`; a client that does not is refused at the
/// connection preface), as Apple's and Google's push endpoints do: the ground the tests' local
/// providers stand on. Each request is answered by `handler`; connections are counted, since a
/// client that should reuse one must open only one.
public final class LocalHTTP2Server: Sendable {
    public struct Request: Sendable {
        public var method: String
        public var path: String
        /// Names in lower case, as HTTP/2 sends them.
        public var headers: [String: String]
        public var body: Data
        /// HTTP/2: 2.
        public var majorVersion: Int
        /// Which connection (1, 2, ...) the request came on.
        public var connection: Int

        public func header(_ name: String) -> String? { headers[name.lowercased()] }
    }

    public struct Answer: Sendable {
        public var status: Int
        public var headers: [(String, String)]
        public var body: Data

        public init(status: Int, headers: [(String, String)] = [], body: Data = Data()) {
            self.status = status
            self.headers = headers
            self.body = body
        }

        public static func json(_ status: Int, _ text: String, headers: [(String, String)] = []) -> Answer {
            Answer(status: status, headers: [("content-type", "application/json")] + headers, body: Data(text.utf8))
        }
    }

    public let port: Int
    private let channel: any Channel
    private let connections: Counter

    public var connectionsAccepted: Int { connections.count.withLock { $0 } }

    private init(port: Int, channel: any Channel, connections: Counter) {
        self.port = port
        self.channel = channel
        self.connections = connections
    }

    public var url: URL { URL(string: "https://localhost:\(port)")! }

    /// Listens on 127.0.0.1 and a free port, with the certificate and key (PEM files) given.
    public static func start(
        certificate: URL, privateKey: URL, handler: @escaping @Sendable (Request) async -> Answer
    ) async throws -> LocalHTTP2Server {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate.path).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: privateKey.path, format: .pem)))
        tls.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: tls)
        let counter = Counter()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                let connection = counter.next()
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                }.flatMap {
                    channel.configureHTTP2Pipeline(mode: .server) { stream in
                        stream.eventLoop.makeCompletedFuture {
                            try stream.pipeline.syncOperations.addHandlers([
                                HTTP2FramePayloadToHTTP1ServerCodec(), StreamHandler(connection: connection, handler: handler),
                            ])
                        }
                    }.map { _ in }
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = channel.localAddress?.port ?? 0
        return LocalHTTP2Server(port: port, channel: channel, connections: counter)
    }

    public func stop() async {
        try? await channel.close()
    }

    fileprivate final class Counter: Sendable {
        let count = Mutex(0)
        func next() -> Int { count.withLock { $0 += 1; return $0 } }
    }
}

/// One HTTP/2 stream: the request gathered, handed to the handler, its answer written back.
private final class StreamHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let connection: Int
    let handler: @Sendable (LocalHTTP2Server.Request) async -> LocalHTTP2Server.Answer
    private var head: HTTPRequestHead?
    private var body = Data()

    init(connection: Int, handler: @escaping @Sendable (LocalHTTP2Server.Request) async -> LocalHTTP2Server.Answer) {
        self.connection = connection
        self.handler = handler
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body(let buffer):
            body.append(contentsOf: buffer.readableBytesView)
        case .end:
            guard let head else { return }
            var headers: [String: String] = [:]
            for (name, value) in head.headers { headers[name.lowercased()] = value }
            let request = LocalHTTP2Server.Request(
                method: head.method.rawValue, path: head.uri, headers: headers, body: body, majorVersion: head.version.major,
                connection: connection)
            let promise = context.eventLoop.makePromise(of: LocalHTTP2Server.Answer.self)
            let handler = self.handler
            promise.completeWithTask { await handler(request) }
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            promise.futureResult.whenSuccess { answer in
                let context = bound.value
                var headers = HTTPHeaders(answer.headers)
                headers.replaceOrAdd(name: "content-length", value: "\(answer.body.count)")
                context.write(NIOAny(HTTPServerResponsePart.head(
                    HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: answer.status), headers: headers))), promise: nil)
                context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(data: answer.body)))), promise: nil)
                context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
            }
        }
    }
}
