import Crypto
import Foundation
import Hummingbird
import BackplaneWire

/// `GET /metrics`: the Prometheus text format. Open unless a token is configured; then it needs
/// `Authorization: Bearer <token>` (a scraper's secret, separate from the application tokens).
/// docs/operations.md says what to scrape and alert on.
struct MetricsController {
    let services: BackplaneServices
    let token: String?

    func addRoutes(to router: Router<BackplaneRequestContext>) {
        router.get("metrics") { request, _ -> Response in
            if let token {
                let presented = request.headers[.authorization].map { Data($0.utf8) } ?? Data()
                // Compared as hashes: equal-length values, so the comparison's time says nothing.
                guard SHA256.hash(data: presented) == SHA256.hash(data: Data("Bearer \(token)".utf8)) else {
                    throw ServiceError.invalidCredentials("Send 'Authorization: Bearer <metrics token>'.")
                }
            }
            guard let registry = services.metrics.registry else { throw ServiceError.notFound("Metrics are off.") }
            // Gauges read when scraped rather than kept up to date on every change.
            services.metrics.channelsOpen.set(services.wakeUpHub.channelCount)
            if let nonces = try? await services.health.nonceCount() { services.metrics.nonces.set(nonces) }
            var buffer = ByteBuffer()
            buffer.writeBytes(registry.emitToBuffer())
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"], body: .init(byteBuffer: buffer))
        }
    }
}
