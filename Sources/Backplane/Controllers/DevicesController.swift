import Foundation
import HTTPTypes
import Hummingbird
import BackplaneWire

/// The device API: every route is signed with an app key; all but registration also need the
/// device credential, and a device may act only on itself.
struct DevicesController {
    let devices: DeviceService
    let userIdentity: UserIdentityService
    let sync: SyncService
    let registrationLimits: RegistrationLimiters

    func addRegistration(to group: RouterGroup<RegistrationRequestContext>) {
        group.post(use: register)
    }

    /// Routes under `/v1`, in a group signed by the device.
    func addRoutes(to group: RouterGroup<DeviceRequestContext>) {
        group
            .get("devices", use: userDevices)
            .get("devices/:deviceId", use: device)
            .patch("devices/:deviceId", use: updateProfile)
            .put("devices/:deviceId/download-enabled", use: setDownloadEnabled)
            .post("devices/:deviceId/unregister", use: unregister)
            // Another device of the same user (not `:deviceId`: a device acts on itself only there).
            .put("user-devices/:siblingId/download-enabled", use: setSiblingDownloadEnabled)
            // Reached only when a request for the channel was not a WebSocket upgrade.
            .get("devices/:deviceId/channel") { _, _ -> Response in
                throw ServiceError.badRequest("This is the device's WebSocket channel: connect with an HTTP Upgrade (websocket) request.")
            }
    }

    /// `POST /v1/sync`, in a group that leaves the nonce to the sync (`SyncService`), which spends
    /// it in its own transaction.
    func addSync(to group: RouterGroup<SignedDeviceRequestContext>) {
        group.post(use: sync)
    }

    @Sendable func sync(_ request: Request, context: SignedDeviceRequestContext) async throws -> SyncResponse {
        // An empty body is an empty report.
        let body = try await request.decode(as: SyncRequest.self, context: context, orIfEmpty: SyncRequest())
        return try await self.sync.sync(context.signed, body)
    }

    @Sendable func register(_ request: Request, context: RegistrationRequestContext) async throws -> EditedResponse<RegisterDeviceResponse> {
        let body = try await request.decode(as: RegisterDeviceRequest.self, context: context)
        // Checked before it keys a bucket: a 1 MiB user id must not be kept.
        try Validate.identifier(body.userId, field: "userId")
        try registrationLimits.checkAddress(request, peer: context.peerAddress)
        func header(_ name: String) -> String? { HTTPField.Name(name).flatMap { request.headers[$0] } }
        let userToken = try await userIdentity.check(
            applicationId: context.applicationId, userId: body.userId, deviceId: body.deviceId, token: header(UserToken.header))
        if userToken != .missing { try registrationLimits.checkUser(applicationId: context.applicationId, userId: body.userId) }
        let proof = RegistrationProof(
            signedBytes: Data(context.stringToSign.utf8), deviceSignature: header(RequestSigning.Header.deviceProof),
            credential: header(RequestSigning.Header.deviceCredential))
        let response = try await devices.register(applicationId: context.applicationId, body, proof: proof, userToken: userToken)
        return EditedResponse(status: response.outcome == .created ? .created : .ok, response: response)
    }

    @Sendable func userDevices(_ request: Request, context: DeviceRequestContext) async throws -> UserDevicesResponse {
        let me = context.device
        return try await devices.userDevices(applicationId: me.applicationId, deviceId: me.deviceId)
    }

    @Sendable func device(_ request: Request, context: DeviceRequestContext) async throws -> DeviceResponse {
        let me = context.device
        return try await devices.device(applicationId: me.applicationId, deviceId: me.deviceId)
    }

    @Sendable func updateProfile(_ request: Request, context: DeviceRequestContext) async throws -> DeviceResponse {
        let me = context.device
        let update = try await request.decode(as: DeviceProfileUpdate.self, context: context)
        return try await devices.updateProfile(applicationId: me.applicationId, deviceId: me.deviceId, update)
    }

    @Sendable func setDownloadEnabled(_ request: Request, context: DeviceRequestContext) async throws -> DeviceResponse {
        let me = context.device
        let body = try await request.decode(as: DownloadEnabledRequest.self, context: context)
        return try await devices.setDownloadEnabled(
            applicationId: me.applicationId, deviceId: me.deviceId, enabled: body.downloadEnabled, origin: .device)
    }

    @Sendable func setSiblingDownloadEnabled(_ request: Request, context: DeviceRequestContext) async throws -> DeviceResponse {
        let me = context.device
        let body = try await request.decode(as: DownloadEnabledRequest.self, context: context)
        return try await devices.setSiblingDownloadEnabled(
            applicationId: me.applicationId, deviceId: me.deviceId, siblingId: try context.pathValue("siblingId"), enabled: body.downloadEnabled)
    }

    @Sendable func unregister(_ request: Request, context: DeviceRequestContext) async throws -> DeviceResponse {
        let me = context.device
        return try await devices.unregister(applicationId: me.applicationId, deviceId: me.deviceId, origin: .device)
    }

}
