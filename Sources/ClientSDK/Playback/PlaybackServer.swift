import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// The loopback HTTP server players play downloads through (`engine.playback`): bound to
/// 127.0.0.1 on a free port, for one run of the engine. Every URL it hands out starts with the
/// run's token, 256 random bits: other apps on the device can reach the port, but not guess a
/// path that answers. NIO's HTTP/1.1 pipeline reads the requests (keep-alive, pipelining, any
/// number of players at once); `PlaybackHTTPHandler` answers them.
///
/// What another app can hold is bounded (`PlaybackOptions`): open connections are capped, a
/// player's kept before a stranger's (`PlaybackConnections`); a connection that does not send a
/// request in time is closed (`PlaybackConnectionGuard`); and when the process runs out of
/// descriptors the server stops accepting for a while instead of spinning on `accept` (`AcceptPause`).
final class PlaybackServer: Sendable {
    let token: String
    let port: Int
    let connections: PlaybackConnections
    private let channel: any Channel

    private init(token: String, port: Int, connections: PlaybackConnections, channel: any Channel) {
        self.token = token
        self.port = port
        self.connections = connections
        self.channel = channel
    }

    /// `origins`: how files of an asset still downloading are fetched for a player.
    static func start(
        library: any PlaybackLibrary, origins: OriginPassThrough, options: PlaybackOptions = PlaybackOptions()
    ) async throws -> PlaybackServer {
        var generator = SystemRandomNumberGenerator()
        let token = Base64URL.encode((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
        let connections = PlaybackConnections(limit: options.maxConnections)
        let pause = TimeAmount(options.acceptBackoff)
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(AcceptPause(pause: pause))
                }
            }
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(
                        PlaybackConnectionGuard(connections: connections, options: options, token: token))
                    try channel.pipeline.syncOperations.addHandler(PlaybackHTTPHandler(token: token, library: library, origins: origins))
                }
            }
        let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        guard let port = channel.localAddress?.port else {
            try? await channel.close()
            throw BackplaneClientError(kind: .localStorage, message: "The playback server has no port.")
        }
        return PlaybackServer(token: token, port: port, connections: connections, channel: channel)
    }

    /// The URL of a file of an asset's directory.
    func url(assetId: String, relativePath: String) -> URL {
        URL(string: "http://127.0.0.1:\(port)" + PlaybackPath.path(token: token, assetId: assetId, relativePath: relativePath))!
    }

    func stop() async {
        try? await channel.close()
    }
}
