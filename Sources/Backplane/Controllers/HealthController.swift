import Foundation
import Hummingbird
import BackplaneWire

/// Liveness (`/healthz`: the process answers) and readiness (`/readyz`: the database answers too).
struct HealthController {
    let health: StoreHealth

    func addRoutes(to router: Router<BackplaneRequestContext>) {
        router.get("healthz") { _, _ in HealthStatus(status: "ok") }
        router.get("readyz") { _, _ -> HealthStatus in
            guard await health.isReachable() else {
                throw ServiceError(.serviceUnavailable, "The database does not answer.")
            }
            return HealthStatus(status: "ready")
        }
    }
}
