import AsyncHTTPClient
import Foundation
import NIOPosix
import NIOSSL
import Synchronization

/// The HTTP clients downloads fetch with.
enum DownloadClients {
    /// Downloads share one client: its pool keeps connections to an origin open from one file
    /// to the next and from one asset to the next. It lives as long as the process, like
    /// `HTTPClient.shared`, with a read timeout so that a stalled answer counts as a failed try.
    /// It speaks HTTP/2 to origins that offer it by ALPN, and HTTP/1.1 to the others, with as
    /// many connections per host as the engine has requests in flight there: the engine keeps
    /// that under `maxConnectionsPerHost` (the pool's own limit is that option's largest value).
    static let shared = makeClient(tls: nil)

    /// The client trusting the certificate authorities in `file` beside the system's (one per
    /// file, for the life of the process), or the shared one.
    static func client(trusting file: URL?) throws -> HTTPClient {
        guard let file else { return shared }
        return try originClients.withLock { clients in
            if let client = clients[file.path] { return client }
            let client = makeClient(tls: try TrustedAuthorities.tlsConfiguration(trusting: file))
            clients[file.path] = client
            return client
        }
    }

    private static let originClients = Mutex<[String: HTTPClient]>([:])

    private static func makeClient(tls: TLSConfiguration?) -> HTTPClient {
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls, timeout: .init(connect: .seconds(15), read: .seconds(30)))
        configuration.httpVersion = .automatic
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = DownloadOptions.connectionsPerHostRange.upperBound
        // A refused connection fails the try at once; the rule of threes does the retrying.
        // (The client's own retries would hold each try until its connect timeout.)
        configuration.connectionPool.retryConnectionEstablishment = false
        // NIO's own event loops, on every platform: on Apple platforms the default group is
        // Network.framework's, whose TLS would ignore the trusted authorities.
        return HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
    }
}
