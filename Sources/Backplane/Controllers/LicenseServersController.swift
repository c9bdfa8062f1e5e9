import Foundation
import Hummingbird
import BackplaneWire

/// The license servers an application forwards to (bearer, admin scope): set, remove, list
/// (header names only).
struct LicenseServersController {
    let licenseServers: LicenseServerService

    func addAdminRoutes(to group: RouterGroup<TokenRequestContext>) {
        group
            .get("license-servers", use: list)
            .put("license-servers/:system", use: set)
            .delete("license-servers/:system", use: delete)
    }

    @Sendable func list(_ request: Request, context: TokenRequestContext) async throws -> LicenseServerList {
        try await licenseServers.list(applicationId: context.applicationId)
    }

    @Sendable func set(_ request: Request, context: TokenRequestContext) async throws -> LicenseServer {
        let body = try await request.decode(as: LicenseServerRequest.self, context: context)
        return try await licenseServers.set(applicationId: context.applicationId, system: try context.pathValue("system"), body)
    }

    @Sendable func delete(_ request: Request, context: TokenRequestContext) async throws -> HTTPResponse.Status {
        try await licenseServers.delete(applicationId: context.applicationId, system: try context.pathValue("system"))
        return .noContent
    }
}
