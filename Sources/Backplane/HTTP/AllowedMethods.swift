import Hummingbird
import Synchronization

/// The methods each route path serves, so a request for a known path with another method is
/// answered 405 with an `Allow` header (RFC 9110 §15.5.6) instead of the router's 404.
///
/// Filled once the router has all its routes; the error middleware, added before them, reads it.
final class AllowedMethods: Sendable {
    private struct Route {
        /// Path segments; `nil` matches any one segment (a `{parameter}` or `*`).
        var segments: [String?]
        var method: String
    }

    private let routes = Mutex<[Route]>([])

    /// Learns the routes a router serves (call after the last route is added).
    func learn<Context>(from router: Router<Context>) {
        let learned = router.routes.map { route in
            Route(
                segments: Self.segments("\(route.path)").map { $0.contains("{") || $0.contains("*") || $0.hasPrefix(":") ? nil : $0 },
                method: route.method.rawValue)
        }
        routes.withLock { $0 = learned }
    }

    /// The methods served at `path`, sorted; empty when no route has this path. As the router does,
    /// a literal segment wins over a parameter: `/v1/devices/register` is not `/v1/devices/{deviceId}`.
    func methods(for path: String) -> [String] {
        let segments = Self.segments(path)
        var candidates = routes.withLock { $0 }.filter { $0.segments.count == segments.count }
        for (position, segment) in segments.enumerated() {
            let literal = candidates.filter { $0.segments[position] == segment }
            candidates = literal.isEmpty ? candidates.filter { $0.segments[position] == nil } : literal
        }
        return Set(candidates.map(\.method)).sorted()
    }

    private static func segments(_ path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }
}
