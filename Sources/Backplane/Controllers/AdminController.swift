import Foundation
import Hummingbird
import BackplaneWire

/// The admin API (bearer token with scope `admin`), always within the token's application.
struct AdminController {
    let devices: DeviceService
    let applications: ApplicationService
    let commands: CommandService
    let userIdentity: UserIdentityService

    func addRoutes(to group: RouterGroup<TokenRequestContext>) {
        group
            .get("devices", use: listDevices)
            .get("devices/:deviceId", use: device)
            .put("devices/:deviceId/download-enabled", use: setDownloadEnabled)
            .post("devices/:deviceId/unregister", use: unregister)
            .post("devices/:deviceId/release", use: release)
            .get("settings", use: settings)
            .patch("settings", use: updateSettings)
            .get("user-identity", use: userIdentityConfiguration)
            .put("user-identity", use: setUserIdentity)
            .delete("user-identity", use: deleteUserIdentity)
            .get("keys", use: keys)
            .post("keys", use: addKey)
            .post("keys/:keyId/revoke", use: revokeKey)
            .get("tokens", use: tokens)
            .post("tokens", use: createToken)
            .post("tokens/:tokenId/revoke", use: revokeToken)
            .post("commands", use: enqueueCommand)
            .get("commands", use: listCommands)
            .get("commands/:commandId", use: command)
            .post("commands/:commandId/cancel", use: cancelCommand)
            .get("devices/:deviceId/commands", use: deviceCommands)
    }

    @Sendable func enqueueCommand(_ request: Request, context: TokenRequestContext) async throws -> EditedResponse<CommandList> {
        let body = try await request.decode(as: EnqueueCommandRequest.self, context: context)
        return EditedResponse(status: .created, response: try await commands.enqueue(applicationId: context.applicationId, body))
    }

    @Sendable func listCommands(_ request: Request, context: TokenRequestContext) async throws -> CommandPage {
        let query = request.uri.queryParameters
        func text(_ name: String) -> String? { query[Substring(name)].map(String.init) }
        let filter = CommandFilter(
            deviceId: text("deviceId"),
            state: try QueryValue.option(text("state"), name: "state", as: CommandState.self),
            type: try QueryValue.option(text("type"), name: "type", as: CommandType.self))
        return try await commands.list(
            applicationId: context.applicationId, filter: filter, cursor: text("cursor"), limit: try QueryValue.int(text("limit"), name: "limit"))
    }

    @Sendable func command(_ request: Request, context: TokenRequestContext) async throws -> Command {
        try await commands.command(applicationId: context.applicationId, commandId: try context.parameters.require("commandId"))
    }

    @Sendable func cancelCommand(_ request: Request, context: TokenRequestContext) async throws -> Command {
        try await commands.cancel(applicationId: context.applicationId, commandId: try context.parameters.require("commandId"))
    }

    @Sendable func deviceCommands(_ request: Request, context: TokenRequestContext) async throws -> CommandList {
        try await commands.commands(applicationId: context.applicationId, deviceId: try Self.deviceId(context))
    }

    @Sendable func listDevices(_ request: Request, context: TokenRequestContext) async throws -> DevicePage {
        let query = request.uri.queryParameters
        let filter = DeviceFilter(
            userId: query["userId"].map(String.init),
            externalDeviceId: query["externalDeviceId"].map(String.init),
            includeUnregistered: try QueryValue.bool(query["includeUnregistered"].map(String.init), name: "includeUnregistered") ?? false)
        let limit = try QueryValue.int(query["limit"].map(String.init), name: "limit")
        return try await devices.listDevices(
            applicationId: context.applicationId, filter: filter, cursor: query["cursor"].map(String.init), limit: limit)
    }

    @Sendable func device(_ request: Request, context: TokenRequestContext) async throws -> DeviceResponse {
        try await devices.adminDevice(applicationId: context.applicationId, deviceId: try Self.deviceId(context))
    }

    @Sendable func setDownloadEnabled(_ request: Request, context: TokenRequestContext) async throws -> DeviceResponse {
        let body = try await request.decode(as: DownloadEnabledRequest.self, context: context)
        return try await devices.setDownloadEnabled(
            applicationId: context.applicationId, deviceId: try Self.deviceId(context),
            enabled: body.downloadEnabled, origin: .admin)
    }

    @Sendable func unregister(_ request: Request, context: TokenRequestContext) async throws -> DeviceResponse {
        try await devices.unregister(
            applicationId: context.applicationId, deviceId: try Self.deviceId(context), origin: .admin)
    }

    @Sendable func release(_ request: Request, context: TokenRequestContext) async throws -> DeviceResponse {
        try await devices.release(applicationId: context.applicationId, deviceId: try Self.deviceId(context))
    }

    @Sendable func settings(_ request: Request, context: TokenRequestContext) async throws -> SettingsResponse {
        let applicationId = context.applicationId
        return SettingsResponse(applicationId: applicationId, settings: try await applications.settings(applicationId: applicationId))
    }

    @Sendable func updateSettings(_ request: Request, context: TokenRequestContext) async throws -> SettingsResponse {
        let applicationId = context.applicationId
        let update = try await request.decode(partialUpdate: ApplicationSettingsUpdate.self, context: context)
        return SettingsResponse(applicationId: applicationId, settings: try await applications.updateSettings(applicationId: applicationId, update))
    }

    @Sendable func userIdentityConfiguration(_ request: Request, context: TokenRequestContext) async throws -> UserIdentityResponse {
        try await userIdentity.configuration(applicationId: context.applicationId)
    }

    @Sendable func setUserIdentity(_ request: Request, context: TokenRequestContext) async throws -> UserIdentityResponse {
        let body = try await request.decode(as: UserIdentityUpdate.self, context: context)
        let configuration = try await userIdentity.set(applicationId: context.applicationId, body)
        return UserIdentityResponse(applicationId: context.applicationId, configuration: configuration)
    }

    @Sendable func deleteUserIdentity(_ request: Request, context: TokenRequestContext) async throws -> HTTPResponse.Status {
        try await userIdentity.delete(applicationId: context.applicationId)
        return .noContent
    }

    @Sendable func keys(_ request: Request, context: TokenRequestContext) async throws -> AppKeyList {
        AppKeyList(keys: try await applications.appKeys(applicationId: context.applicationId))
    }

    @Sendable func addKey(_ request: Request, context: TokenRequestContext) async throws -> EditedResponse<CreatedAppKey> {
        EditedResponse(status: .created, response: try await applications.addAppKey(applicationId: context.applicationId))
    }

    @Sendable func revokeKey(_ request: Request, context: TokenRequestContext) async throws -> AppKey {
        try await applications.revokeAppKey(
            applicationId: context.applicationId, keyId: try context.parameters.require("keyId"))
    }

    @Sendable func tokens(_ request: Request, context: TokenRequestContext) async throws -> TokenList {
        TokenList(tokens: try await applications.tokens(applicationId: context.applicationId))
    }

    /// Narrower tokens only: an admin token made here would outlive the revocation of a leaked
    /// admin token that made it. Admin tokens come from `backplane token create` on the host.
    @Sendable func createToken(_ request: Request, context: TokenRequestContext) async throws -> EditedResponse<CreatedToken> {
        let body = try await request.decode(as: CreateTokenRequest.self, context: context)
        guard body.scope != .admin else {
            throw ServiceError(.forbidden,
                "Admin tokens are created with 'backplane token create' on the server; this route makes cms and reporting tokens.",
                details: ["field": .string("scope")])
        }
        return EditedResponse(status: .created, response: try await applications.issueToken(
            applicationId: context.applicationId, scope: body.scope, name: body.name, expiresAt: body.expiresAt))
    }

    @Sendable func revokeToken(_ request: Request, context: TokenRequestContext) async throws -> TokenInfo {
        try await applications.revokeToken(applicationId: context.applicationId, tokenId: try context.pathValue("tokenId"))
    }

    private static func deviceId(_ context: TokenRequestContext) throws -> String {
        try context.pathValue("deviceId")
    }
}
