import Foundation
import Hummingbird
import BackplaneWire

/// Users, devices and commands: what support staff open when a user calls.
extension ConsoleController {
    func addDeviceRoutes(to group: RouterGroup<ConsoleRequestContext>) {
        group
            .get("users/:userId", use: user)
            .get("devices/:deviceId", use: device)
            .post("devices/:deviceId/download-enabled", use: setDownloadEnabled)
            .post("devices/:deviceId/commands", use: enqueueCommand)
            .get("commands", use: commandList)
            .post("commands/:commandId/cancel", use: cancelCommand)
    }

    // MARK: user

    struct GrantRow {
        let assetId: String
        let deviceId: String
        let deviceHref: String
        let state: String
        let granted: String
        let released: String
    }

    struct UserModel {
        let devices: [DeviceRow]
        let enabledCount: Int
        let limitText: String
        let grants: [GrantRow]
        let next: String?
    }

    @Sendable func user(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        try context.session.require(.admin, toDo: "The user page")
        let userId = try context.pathValue("userId")
        try Validate.identifier(userId, field: "userId")
        let applicationId = context.applicationId
        // A user's registered devices are bounded by what registration allows; read them whole.
        let devices = try await services.devices.devices(applicationId: applicationId, userId: userId)
        let settings = try await services.applications.settings(applicationId: applicationId)
        let grants = try await services.grants.list(
            applicationId: applicationId, userId: userId, deviceId: nil, cursor: try ConsoleForms.query(request)["cursor"], limit: nil)
        let model = UserModel(
            devices: devices.map(DeviceRow.init), enabledCount: devices.filter { $0.isRegistered && $0.downloadEnabled }.count,
            limitText: settings.deviceLimit == ApplicationSettings.unlimited ? "unlimited" : String(settings.deviceLimit),
            grants: grants.grants.map { grant in
                GrantRow(
                    assetId: grant.assetId, deviceId: grant.deviceId, deviceHref: ConsolePaths.device(grant.deviceId), state: grant.state.rawValue,
                    granted: ConsoleFormat.time(grant.grantedAt), released: grant.state == .active ? "" : ConsoleFormat.time(grant.updatedAt))
            },
            next: grants.nextCursor.map { ConsoleFormat.link(ConsolePaths.user(userId), [("cursor", $0)]) })
        return renderer.page("user", title: "User \(userId)", model: model, session: context.session, current: .find)
    }

    // MARK: device

    struct ProfileLine {
        let label: String
        let value: String
        let href: String?
    }

    struct CommandChoice {
        let type: String
        let label: String
        let destructive: Bool
        let needsAssets: Bool
        let commandAction: String
    }

    struct DeviceModel {
        let profile: [ProfileLine]
        let registered: Bool
        let toggleAction: String
        let toggleValue: String
        let toggleLabel: String
        let commandTypes: [CommandChoice]
        let commands: [CommandRow]
        let next: String?
        let licenses: [LicenseRow]
    }

    /// A license of the device: its key ids, never a key (the console never has one).
    struct LicenseRow {
        let licenseId: String
        let assetId: String
        let assetHref: String
        let system: String
        let kids: String
        let issued: String
        let expires: String
        let state: String
    }

    @Sendable func device(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        try context.session.require(.admin, toDo: "The device page")
        let deviceId = try context.pathValue("deviceId")
        let applicationId = context.applicationId
        let device = try await services.devices.record(applicationId: applicationId, deviceId: deviceId)
        let commands = try await services.commands.list(
            applicationId: applicationId, filter: CommandFilter(deviceId: deviceId),
            cursor: try ConsoleForms.query(request)["cursor"], limit: nil)
        let row = DeviceRow(device)
        let licenses = try await services.licenses.list(applicationId: applicationId, deviceId: deviceId, limit: nil).licenses
        let profile: [ProfileLine] = [
            ProfileLine(label: "User", value: device.userId, href: ConsolePaths.user(device.userId)),
            ProfileLine(label: "Nickname", value: device.nickname ?? "", href: nil),
            ProfileLine(label: "External device id", value: device.externalDeviceId ?? "", href: nil),
            ProfileLine(label: "Platform", value: [device.platform, device.model, device.osVersion].compactMap { $0 }.joined(separator: " "), href: nil),
            ProfileLine(label: "SDK / app", value: "\(device.sdkVersion ?? "?") / \(device.appVersion ?? "?")", href: nil),
            ProfileLine(label: "Download", value: device.downloadEnabled ? "enabled" : "off", href: nil),
            ProfileLine(label: "Registered", value: ConsoleFormat.time(device.registeredAt), href: nil),
            ProfileLine(label: "Last seen", value: ConsoleFormat.time(device.lastSeenAt), href: nil),
            ProfileLine(label: "State", value: device.unregisteredAt.map { "unregistered \(ConsoleFormat.time($0))" } ?? "registered", href: nil),
        ]
        let action = ConsolePaths.device(deviceId) + "/commands"
        let model = DeviceModel(
            profile: profile, registered: device.unregisteredAt == nil, toggleAction: row.toggleAction ?? "", toggleValue: row.toggleValue,
            toggleLabel: row.toggleLabel,
            commandTypes: CommandType.allCases.map { type in
                CommandChoice(
                    type: type.rawValue, label: Self.label(type), destructive: type != .syncNow, needsAssets: type == .deleteAssets, commandAction: action)
            },
            commands: commands.commands.map(CommandRow.init),
            next: commands.nextCursor.map { ConsoleFormat.link(ConsolePaths.device(deviceId), [("cursor", $0)]) },
            licenses: licenses.map { license in
                LicenseRow(
                    licenseId: license.licenseId, assetId: license.assetId, assetHref: ConsolePaths.asset(license.assetId),
                    system: license.system.rawValue,
                    kids: license.kids.joined(separator: ", "), issued: ConsoleFormat.time(license.issuedAt),
                    expires: license.expiresAt.map { ConsoleFormat.time($0) } ?? "never",
                    state: license.releasedAt.map { "released \(ConsoleFormat.time($0))" } ?? license.state)
            })
        return renderer.page("device", title: "Device \(deviceId)", model: model, session: context.session, current: .find)
    }

    static func label(_ type: CommandType) -> String {
        switch type {
        case .wipe: "Wipe"
        case .deleteAssets: "Delete assets"
        case .kill: "Kill"
        case .unregister: "Unregister"
        case .syncNow: "Sync now"
        default: type.rawValue
        }
    }

    /// What a command does, in the confirmation's words.
    static func consequence(_ type: CommandType) -> String {
        switch type {
        case .wipe: "deletes every downloaded asset on the device"
        case .deleteAssets: "deletes the listed assets on the device"
        case .kill: "wipes the device, unregisters it and makes it forget its credential"
        case .unregister: "unregisters the device: it stops downloading and syncing"
        case .syncNow: "asks the device to sync at once"
        default: "runs '\(type.rawValue)' on the device"
        }
    }


    struct CommandForm: ConsoleForm {
        let csrf: String?
        let type: String
        let assetIds: String?
        let confirm: String?
    }

    /// Two steps: the first answers with a confirmation page, whose button sends the form again
    /// with `confirm=yes`; only that second request enqueues.
    @Sendable func enqueueCommand(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        let form = try await context.form(CommandForm.self, from: request, needs: .admin, toDo: "Sending a command")
        let deviceId = try context.pathValue("deviceId")
        guard let type = CommandType.known(form.type) else { throw ServiceError.validation("Unknown command type '\(form.type)'.", field: "type") }
        let assetIds = form.assetIds.map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty } }
        let devicePath = ConsolePaths.device(deviceId)
        guard ConsoleForms.confirmed(form.confirm) else {
            let assets = assetIds.map { " (\($0.joined(separator: ", ")))" } ?? ""
            let model = ConsoleConfirmation(
                question: "\(Self.label(type))\(assets) on device \(deviceId)? This \(Self.consequence(type)) when the device next syncs.",
                action: devicePath + "/commands", button: Self.label(type),
                fields: [.init(name: "type", value: type.rawValue)] + (form.assetIds.map { [.init(name: "assetIds", value: $0)] } ?? []),
                cancelHref: devicePath)
            return renderer.page("confirm", title: "Confirm: \(Self.label(type))", model: model, session: context.session, current: .find)
        }
        _ = try await services.commands.enqueue(
            applicationId: context.applicationId,
            EnqueueCommandRequest(type: type, deviceId: deviceId, assetIds: type == .deleteAssets ? assetIds : nil))
        return Response(status: .seeOther, headers: [.location: devicePath])
    }

    struct DownloadForm: ConsoleForm {
        let csrf: String?
        let enabled: String
        /// "user" when the switch was on the user page, which the answer then goes back to.
        let back: String?
    }

    @Sendable func setDownloadEnabled(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        let form = try await context.form(DownloadForm.self, from: request, needs: .admin, toDo: "Turning download on or off")
        let deviceId = try context.pathValue("deviceId")
        guard let enabled = try QueryValue.bool(form.enabled, name: "enabled") else { throw ServiceError.validation("'enabled' is missing.") }
        let device = try await services.devices.setDownloadEnabled(
            applicationId: context.applicationId, deviceId: deviceId, enabled: enabled, origin: .admin).device
        let back = form.back == "user" ? ConsolePaths.user(device.userId) : ConsolePaths.device(deviceId)
        return Response(status: .seeOther, headers: [.location: back])
    }

    // MARK: commands

    struct CommandsModel {
        let states: [FilterOption]
        let types: [FilterOption]
        let commands: [CommandRow]
        let next: String?
    }

    @Sendable func commandList(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        try context.session.require(.admin, toDo: "The command list")
        let query = try ConsoleForms.query(request)
        func text(_ name: String) -> String? { query[name] }
        let state = try QueryValue.option(text("state"), name: "state", as: CommandState.self)
        let type = try QueryValue.option(text("type"), name: "type", as: CommandType.self)
        let page = try await services.commands.list(
            applicationId: context.applicationId, filter: CommandFilter(state: state, type: type), cursor: text("cursor"), limit: nil)
        let model = CommandsModel(
            states: FilterOption.all(CommandState.self, selected: state), types: FilterOption.all(CommandType.self, selected: type),
            commands: page.commands.map(CommandRow.init),
            next: page.nextCursor.map { ConsoleFormat.link("/console/commands", [("state", state?.rawValue), ("type", type?.rawValue), ("cursor", $0)]) })
        return renderer.page("commands", title: "Commands", model: model, session: context.session, current: .commands)
    }

    @Sendable func cancelCommand(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        _ = try await context.form(FormTokenOnly.self, from: request, needs: .admin, toDo: "Cancelling a command")
        let command = try await services.commands.cancel(applicationId: context.applicationId, commandId: try context.pathValue("commandId"))
        return Response(status: .seeOther, headers: [.location: ConsolePaths.device(command.deviceId)])
    }
}
