import Foundation
import Hummingbird
import BackplaneWire

/// Download permissions: the device asks (signed by the device), admins look at and reset grants,
/// set asset policies and rotate the entitlement keys (bearer, admin scope), and anyone may fetch the public keys
/// that verify entitlements (a license server has no credentials of ours).
struct DownloadGrantsController {
    let grants: DownloadGrantService
    let assetPolicies: AssetPolicyService
    let entitlements: Entitlements
    let applications: ApplicationService

    func addDeviceRoutes(to group: RouterGroup<DeviceRequestContext>) {
        group.post("download-grants", use: requestPermission)
    }

    func addAdminRoutes(to group: RouterGroup<TokenRequestContext>) {
        group
            .get("download-grants", use: list)
            .post("download-grants/reset-lifetime", use: resetLifetime)
            .post("download-grants/:grantId/revoke", use: revoke)
            .put("asset-policies/:assetId", use: setPolicy)
            .get("asset-policies/:assetId", use: policy)
            .delete("asset-policies/:assetId", use: deletePolicy)
            .post("entitlement-keys", use: rotate)
            .post("entitlement-keys/:keyId/retire", use: retire)
    }

    func addPublicRoutes(to router: Router<BackplaneRequestContext>) {
        router.get("v1/applications/:applicationId/entitlement-keys", use: keySet)
    }

    @Sendable func requestPermission(_ request: Request, context: DeviceRequestContext) async throws -> EditedResponse<DownloadPermissionResponse> {
        let me = context.device
        let body = try await request.decode(as: DownloadPermissionRequest.self, context: context)
        let (response, created) = try await grants.requestPermission(applicationId: me.applicationId, deviceId: me.deviceId, body)
        return EditedResponse(status: created ? .created : .ok, response: response)
    }

    @Sendable func list(_ request: Request, context: TokenRequestContext) async throws -> DownloadGrantPage {
        let query = request.uri.queryParameters
        return try await grants.list(
            applicationId: context.applicationId, userId: query["userId"].map(String.init), deviceId: query["deviceId"].map(String.init),
            cursor: query["cursor"].map(String.init), limit: try QueryValue.int(query["limit"].map(String.init), name: "limit"))
    }

    @Sendable func resetLifetime(_ request: Request, context: TokenRequestContext) async throws -> LifetimeResetResponse {
        let body = try await request.decode(as: LifetimeResetRequest.self, context: context)
        return try await grants.resetLifetime(applicationId: context.applicationId, body)
    }

    @Sendable func revoke(_ request: Request, context: TokenRequestContext) async throws -> RevokedGrant {
        try await grants.revoke(applicationId: context.applicationId, grantId: try context.pathValue("grantId"))
    }

    @Sendable func setPolicy(_ request: Request, context: TokenRequestContext) async throws -> AssetPolicyEntry {
        let body = try await request.decode(as: AssetPolicy.self, context: context)
        return try await assetPolicies.set(applicationId: context.applicationId, assetId: try context.pathValue("assetId"), body)
    }

    @Sendable func policy(_ request: Request, context: TokenRequestContext) async throws -> AssetPolicyEntry {
        try await assetPolicies.get(applicationId: context.applicationId, assetId: try context.pathValue("assetId"))
    }

    @Sendable func deletePolicy(_ request: Request, context: TokenRequestContext) async throws -> HTTPResponse.Status {
        try await assetPolicies.delete(applicationId: context.applicationId, assetId: try context.pathValue("assetId"))
        return .noContent
    }

    @Sendable func rotate(_ request: Request, context: TokenRequestContext) async throws -> EditedResponse<EntitlementKeySet> {
        EditedResponse(status: .created, response: try await entitlements.rotate(applicationId: context.applicationId))
    }

    @Sendable func retire(_ request: Request, context: TokenRequestContext) async throws -> EntitlementKeySet {
        try await entitlements.retire(applicationId: context.applicationId, keyId: try context.pathValue("keyId"))
    }

    @Sendable func keySet(_ request: Request, context: BackplaneRequestContext) async throws -> EntitlementKeySet {
        let applicationId = try context.pathValue("applicationId")
        guard applicationId.utf8.count <= WireLimits.maxIdentifierLength, try await applications.exists(applicationId: applicationId) else {
            throw ServiceError.notFound("No such application.")
        }
        return try await entitlements.keySet(applicationId: applicationId)
    }
}
