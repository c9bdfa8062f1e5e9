import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// An origin on 127.0.0.1 that answers exactly the bytes a test scripts, as an attacker's or a
/// broken server would: any status line and headers (a negative `Content-Range`, a length of
/// exabytes), bodies cut short, a byte every few seconds. Requests are read with NIO's HTTP/1
/// decoder; answers are written raw, so nothing on this side corrects them.
final class HostileOrigin: Sendable {
    enum Part: Sendable {
        case bytes(Data)
        /// Nothing is sent for this long.
        case pause(Duration)
        /// The connection is closed here.
        case close
    }

    /// What to send for one request: its head and the how-manieth request of its path it is (1 first).
    typealias Script = @Sendable (_ head: HTTPRequestHead, _ attempt: Int) -> [Part]

    private struct State {
        var scripts: [String: Script] = [:]
        var requests: [String: Int] = [:]
        var heads: [String: [HTTPRequestHead]] = [:]
        /// Paths whose script answers `HEAD` too.
        var headScripts: Set<String> = []
    }

    private let state = LockedBox(State())
    private let server: NIOAsyncChannel<NIOAsyncChannel<HTTPServerRequestPart, ByteBuffer>, Never>
    private let serving = LockedBox<Task<Void, Never>?>(nil)
    let port: Int

    private init(server: NIOAsyncChannel<NIOAsyncChannel<HTTPServerRequestPart, ByteBuffer>, Never>) {
        self.server = server
        self.port = server.channel.localAddress?.port ?? 0
    }

    static func start() async throws -> HostileOrigin {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPRequestDecoder()))
                    return try NIOAsyncChannel<HTTPServerRequestPart, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        let origin = HostileOrigin(server: server)
        origin.serving.withLock { $0 = Task { await origin.accept() } }
        return origin
    }

    func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    /// Answers requests for `path` with `script` from now on (any other path: 404); `HEAD` and a
    /// `GET` of the first byte alone (the size estimate's) only with `answeringHead` (else 405).
    func route(_ path: String, answeringHead: Bool = false, _ script: @escaping Script) {
        state.withLock { state in
            state.scripts[path] = script
            if answeringHead { state.headScripts.insert(path) } else { state.headScripts.remove(path) }
        }
    }

    /// Answers `path` with a well-formed 200 and `body`.
    func serve(_ path: String, _ body: Data, contentType: String = "video/mp4") {
        route(path) { _, _ in [.bytes(Self.answer(headers: ["Content-Type": contentType, "Content-Length": "\(body.count)"], body: body))] }
    }

    func requests(_ path: String) -> Int { state.withLock { $0.requests[path] ?? 0 } }
    func heads(_ path: String) -> [HTTPRequestHead] { state.withLock { $0.heads[path] ?? [] } }

    /// An answer's bytes: the status line, the headers as given (in order, unchecked), the body.
    static func answer(status: String = "200 OK", headers: KeyValuePairs<String, String>, body: Data = Data()) -> Data {
        var head = "HTTP/1.1 \(status)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        return Data((head + "\r\n").utf8) + body
    }

    func stop() async {
        try? await server.channel.close()
        serving.withLock { $0?.cancel() }
    }

    private func accept() async {
        try? await withThrowingDiscardingTaskGroup { group in
            try await server.executeThenClose { connections in
                for try await connection in connections {
                    group.addTask { await self.serve(connection) }
                }
            }
        }
    }

    private func serve(_ connection: NIOAsyncChannel<HTTPServerRequestPart, ByteBuffer>) async {
        try? await connection.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            for try await part in inbound {
                switch part {
                case .head(let received):
                    head = received
                case .body:
                    continue
                case .end:
                    guard let head else { return }
                    let path = String(head.uri.prefix { $0 != "?" })
                    // The engine's size estimate (`HEAD`, then a `GET` of the first byte) is
                    // refused unless a test scripts it, so that each script's attempts are the
                    // downloads' `GET`s.
                    let probe = head.method == .HEAD || head.headers.first(name: "range") == "bytes=0-0"
                    if probe, !(state.withLock { $0.headScripts.contains(path) }) {
                        try await outbound.write(ByteBuffer(bytes: Self.answer(status: "405 Method Not Allowed", headers: ["Content-Length": "0"])))
                        continue
                    }
                    let (script, attempt) = state.withLock { state -> (Script?, Int) in
                        state.requests[path, default: 0] += 1
                        state.heads[path, default: []].append(head)
                        return (state.scripts[path], state.requests[path]!)
                    }
                    let parts = script?(head, attempt)
                        ?? [.bytes(Self.answer(status: "404 Not Found", headers: ["Content-Length": "0"]))]
                    for part in parts {
                        switch part {
                        case .bytes(let data): try await outbound.write(ByteBuffer(bytes: data))
                        case .pause(let duration): try await Task.sleep(for: duration)
                        case .close: return
                        }
                    }
                }
            }
        }
    }
}
