import Foundation
import Hummingbird
import Shared

/// The admin API (bearer token with scope `admin`), always within the token's application.
struct AdminController {
    let devices: DeviceService
    let applications: ApplicationService
    let commands: CommandService
    let store: any BackplaneStore

    func addRoutes(to router: Router<BackplaneRequestContext>) {
        router.group("v1/admin")
            .add(middleware: BearerTokenMiddleware(store: store, scope: .admin))
            .get("devices", use: listDevices)
            .get("devices/:deviceId", use: device)
            .put("devices/:deviceId/download-enabled", use: setDownloadEnabled)
            .post("devices/:deviceId/unregister", use: unregister)
            .post("devices/:deviceId/release", use: release)
            .get("settings", use: settings)
            .patch("settings", use: updateSettings)
            .get("keys", use: keys)
            .post("keys", use: addKey)
            .post("keys/:keyId/revoke", use: revokeKey)
            .post("commands", use: enqueueCommand)
            .get("commands/:commandId", use: command)
            .post("commands/:commandId/cancel", use: cancelCommand)
            .get("devices/:deviceId/commands", use: deviceCommands)
    }

    @Sendable func enqueueCommand(_ request: Request, context: BackplaneRequestContext) async throws -> EditedResponse<CommandList> {
        let body = try await request.decode(as: EnqueueCommandRequest.self, context: context)
        return EditedResponse(status: .created, response: try await commands.enqueue(applicationId: try context.requireApplicationId(), body))
    }

    @Sendable func command(_ request: Request, context: BackplaneRequestContext) async throws -> Command {
        try await commands.command(applicationId: try context.requireApplicationId(), commandId: try context.parameters.require("commandId"))
    }

    @Sendable func cancelCommand(_ request: Request, context: BackplaneRequestContext) async throws -> Command {
        try await commands.cancel(applicationId: try context.requireApplicationId(), commandId: try context.parameters.require("commandId"))
    }

    @Sendable func deviceCommands(_ request: Request, context: BackplaneRequestContext) async throws -> CommandList {
        try await commands.commands(applicationId: try context.requireApplicationId(), deviceId: try Self.deviceId(context))
    }

    @Sendable func listDevices(_ request: Request, context: BackplaneRequestContext) async throws -> DevicePage {
        let query = request.uri.queryParameters
        let filter = DeviceFilter(
            userId: query["userId"].map(String.init),
            externalDeviceId: query["externalDeviceId"].map(String.init),
            includeUnregistered: try QueryValue.bool(query["includeUnregistered"].map(String.init), name: "includeUnregistered") ?? false)
        let limit = try QueryValue.int(query["limit"].map(String.init), name: "limit")
        return try await devices.listDevices(
            applicationId: try context.requireApplicationId(), filter: filter, cursor: query["cursor"].map(String.init), limit: limit)
    }

    @Sendable func device(_ request: Request, context: BackplaneRequestContext) async throws -> DeviceResponse {
        try await devices.adminDevice(applicationId: try context.requireApplicationId(), deviceId: try Self.deviceId(context))
    }

    @Sendable func setDownloadEnabled(_ request: Request, context: BackplaneRequestContext) async throws -> DeviceResponse {
        let body = try await request.decode(as: DownloadEnabledRequest.self, context: context)
        return try await devices.setDownloadEnabled(
            applicationId: try context.requireApplicationId(), deviceId: try Self.deviceId(context),
            enabled: body.downloadEnabled, origin: .admin)
    }

    @Sendable func unregister(_ request: Request, context: BackplaneRequestContext) async throws -> DeviceResponse {
        try await devices.unregister(
            applicationId: try context.requireApplicationId(), deviceId: try Self.deviceId(context), origin: .admin)
    }

    @Sendable func release(_ request: Request, context: BackplaneRequestContext) async throws -> DeviceResponse {
        try await devices.release(applicationId: try context.requireApplicationId(), deviceId: try Self.deviceId(context))
    }

    @Sendable func settings(_ request: Request, context: BackplaneRequestContext) async throws -> SettingsResponse {
        let applicationId = try context.requireApplicationId()
        return SettingsResponse(applicationId: applicationId, settings: try await applications.settings(applicationId: applicationId))
    }

    @Sendable func updateSettings(_ request: Request, context: BackplaneRequestContext) async throws -> SettingsResponse {
        let applicationId = try context.requireApplicationId()
        let update = try await request.decode(as: ApplicationSettingsUpdate.self, context: context)
        return SettingsResponse(applicationId: applicationId, settings: try await applications.updateSettings(applicationId: applicationId, update))
    }

    @Sendable func keys(_ request: Request, context: BackplaneRequestContext) async throws -> AppKeyList {
        AppKeyList(keys: try await applications.appKeys(applicationId: try context.requireApplicationId()))
    }

    @Sendable func addKey(_ request: Request, context: BackplaneRequestContext) async throws -> EditedResponse<CreatedAppKey> {
        EditedResponse(status: .created, response: try await applications.addAppKey(applicationId: try context.requireApplicationId()))
    }

    @Sendable func revokeKey(_ request: Request, context: BackplaneRequestContext) async throws -> AppKey {
        try await applications.revokeAppKey(
            applicationId: try context.requireApplicationId(), keyId: try context.parameters.require("keyId"))
    }

    private static func deviceId(_ context: BackplaneRequestContext) throws -> String {
        try context.pathValue("deviceId")
    }
}
