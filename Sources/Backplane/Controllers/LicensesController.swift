import Foundation
import Hummingbird
import BackplaneWire

/// The license door: devices register their agreement key, ask for licenses and release them
/// (signed by the device); admins list a device's licenses (bearer, admin scope).
struct LicensesController {
    let licenses: LicenseService

    func addDeviceRoutes(to group: RouterGroup<DeviceRequestContext>) {
        group
            .put("devices/:deviceId/agreement-key", use: setAgreementKey)
            .post("licenses", use: issue)
            .post("licenses/:licenseId/release", use: release)
    }

    func addAdminRoutes(to group: RouterGroup<TokenRequestContext>) {
        group.get("devices/:deviceId/licenses", use: list)
    }

    @Sendable func setAgreementKey(_ request: Request, context: DeviceRequestContext) async throws -> HTTPResponse.Status {
        let me = context.device
        let body = try await request.decode(as: AgreementKeyRequest.self, context: context)
        try await licenses.setAgreementKey(applicationId: me.applicationId, deviceId: me.deviceId, body)
        return .noContent
    }

    @Sendable func issue(_ request: Request, context: DeviceRequestContext) async throws -> EditedResponse<LicenseIssueResponse> {
        let me = context.device
        let body = try await request.decode(as: LicenseIssueRequest.self, context: context)
        let (response, created) = try await licenses.issue(applicationId: me.applicationId, deviceId: me.deviceId, body)
        return EditedResponse(status: created ? .created : .ok, response: response)
    }

    @Sendable func release(_ request: Request, context: DeviceRequestContext) async throws -> LicenseReleaseResponse {
        let me = context.device
        let body = try await request.decode(as: LicenseReleaseRequest.self, context: context)
        return try await licenses.release(
            applicationId: me.applicationId, deviceId: me.deviceId, licenseId: try context.pathValue("licenseId"), body)
    }

    @Sendable func list(_ request: Request, context: TokenRequestContext) async throws -> LicenseList {
        try await licenses.list(
            applicationId: context.applicationId, deviceId: try context.pathValue("deviceId"),
            limit: try QueryValue.int(request.uri.queryParameters["limit"].map(String.init), name: "limit"))
    }
}
