import Foundation
import Synchronization

/// The origins the engine's fetches last found answering over HTTP/2 (playlists and manifests
/// included), for the life of the engine. A download's concurrency reads it when it starts:
/// the origin that just served its playlists over one multiplexed connection will carry its
/// segments the same way, so the probe there need not begin where an HTTP/1.1 origin's does
/// (`AdaptiveConcurrency`), before the download's own first file is back.
final class OriginProtocols: Sendable {
    /// Origins remembered at most (a manifest names its hosts; it could name thousands).
    static let capacity = 256

    private let multiplexing = Mutex<Set<String>>([])

    /// An answer from `url`'s origin came over HTTP/2 (`multiplexed`) or not.
    func answered(_ url: URL, multiplexed: Bool) {
        let origin = Self.origin(of: url)
        multiplexing.withLock { hosts in
            guard multiplexed else {
                hosts.remove(origin)
                return
            }
            // Forgetting is harmless: an origin forgotten is probed from the HTTP/1.1 start.
            if hosts.count >= Self.capacity, !hosts.contains(origin) { hosts.removeAll() }
            hosts.insert(origin)
        }
    }

    /// The origins last seen answering over HTTP/2.
    var multiplexingOrigins: Set<String> { multiplexing.withLock { $0 } }

    /// A URL's origin as the engine counts requests in flight: scheme, host and port.
    static func origin(of url: URL) -> String {
        "\(url.scheme ?? "")://\(url.host ?? ""):\(url.port.map(String.init) ?? "")"
    }
}
