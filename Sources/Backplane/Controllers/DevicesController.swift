import Foundation
import HTTPTypes
import Hummingbird
import Shared

/// The device API: every route is signed with an app key; all but registration also need the
/// device credential, and a device may act only on itself.
struct DevicesController {
    let devices: DeviceService
    let sync: SyncService
    let store: any BackplaneStore
    let now: @Sendable () -> Date

    var signedByDevice: SignedRequestMiddleware {
        SignedRequestMiddleware(store: store, devices: devices, requireDevice: true, now: now)
    }

    func addRoutes(to router: Router<BackplaneRequestContext>) {
        router.group("v1/devices/register")
            .add(middleware: SignedRequestMiddleware(store: store, devices: devices, requireDevice: false, now: now))
            .post(use: register)

        router.group("v1/devices")
            .add(middleware: signedByDevice)
            .get(use: userDevices)
            .get(":deviceId", use: device)
            .patch(":deviceId", use: updateProfile)
            .put(":deviceId/download-enabled", use: setDownloadEnabled)
            .post(":deviceId/unregister", use: unregister)
            // Reached only when a request for the channel was not a WebSocket upgrade.
            .get(":deviceId/channel") { _, _ -> Response in
                throw BackplaneError.badRequest("This is the device's WebSocket channel: connect with an HTTP Upgrade (websocket) request.")
            }

        router.group("v1/sync")
            .add(middleware: signedByDevice)
            .post(use: sync)
    }

    @Sendable func sync(_ request: Request, context: BackplaneRequestContext) async throws -> SyncResponse {
        let me = try context.requireDevice()
        // An empty body is an empty report.
        let body = try await request.decode(as: SyncRequest.self, context: context, orIfEmpty: SyncRequest())
        return try await sync.sync(applicationId: me.applicationId, deviceId: me.deviceId, body)
    }

    @Sendable func register(_ request: Request, context: BackplaneRequestContext) async throws -> EditedResponse<RegisterDeviceResponse> {
        let body = try await request.decode(as: RegisterDeviceRequest.self, context: context)
        func header(_ name: String) -> String? { HTTPField.Name(name).flatMap { request.headers[$0] } }
        let proof = RegistrationProof(
            signedBytes: Data((context.stringToSign ?? "").utf8), deviceSignature: header(RequestSigning.Header.deviceProof),
            credential: header(RequestSigning.Header.deviceCredential))
        let response = try await devices.register(applicationId: try context.requireApplicationId(), body, proof: proof)
        return EditedResponse(status: response.outcome == .created ? .created : .ok, response: response)
    }

    @Sendable func userDevices(_ request: Request, context: BackplaneRequestContext) async throws -> UserDevicesResponse {
        let me = try context.requireDevice()
        return try await devices.userDevices(applicationId: me.applicationId, deviceId: me.deviceId)
    }

    @Sendable func device(_ request: Request, context: BackplaneRequestContext) async throws -> DeviceResponse {
        let me = try context.requireDevice()
        return try await devices.device(applicationId: me.applicationId, deviceId: me.deviceId)
    }

    @Sendable func updateProfile(_ request: Request, context: BackplaneRequestContext) async throws -> DeviceResponse {
        let me = try context.requireDevice()
        let update = try await request.decode(as: DeviceProfileUpdate.self, context: context)
        return try await devices.updateProfile(applicationId: me.applicationId, deviceId: me.deviceId, update)
    }

    @Sendable func setDownloadEnabled(_ request: Request, context: BackplaneRequestContext) async throws -> DeviceResponse {
        let me = try context.requireDevice()
        let body = try await request.decode(as: DownloadEnabledRequest.self, context: context)
        return try await devices.setDownloadEnabled(
            applicationId: me.applicationId, deviceId: me.deviceId, enabled: body.downloadEnabled, origin: .device)
    }

    @Sendable func unregister(_ request: Request, context: BackplaneRequestContext) async throws -> DeviceResponse {
        let me = try context.requireDevice()
        return try await devices.unregister(applicationId: me.applicationId, deviceId: me.deviceId, origin: .device)
    }

}
