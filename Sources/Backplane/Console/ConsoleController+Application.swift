import Foundation
import Hummingbird
import BackplaneWire

/// The application's settings, bearer tokens and app keys: what operations staff change.
extension ConsoleController {
    func addApplicationRoutes(to group: RouterGroup<ConsoleRequestContext>) {
        group
            .get("settings", use: settingsPage)
            .post("settings", use: saveSettings)
            .post("settings/user-identity", use: saveUserIdentity)
            .post("settings/user-identity/delete", use: deleteUserIdentity)
            .post("settings/push/apns", use: savePushAPNs)
            .post("settings/push/apns/delete", use: deletePushAPNs)
            .post("settings/push/fcm", use: savePushFCM)
            .post("settings/push/fcm/delete", use: deletePushFCM)
            .get("tokens", use: credentialsPage)
            .post("tokens", use: createToken)
            .post("tokens/:tokenId/revoke", use: revokeToken)
            .post("keys", use: createKey)
            .post("keys/:keyId/revoke", use: revokeKey)
    }

    // MARK: settings

    /// A setting on the form: its label and help, and where it lives (its name in the API and
    /// its place in an update follow from that, `ApplicationSettings.fields`).
    struct SettingField {
        let label: String
        let help: String
        let value: WritableKeyPath<ApplicationSettings, Int> & Sendable
        var name: String { ApplicationSettings.name(of: value) }
    }

    static var settingFields: [SettingField] { [
        SettingField(label: "Device limit", help: "Download-enabled devices per user; 0: none may download.", value: \.deviceLimit),
        SettingField(label: "Downloads per device", help: "Assets held at once on one device.", value: \.maxDownloadsPerDevice),
        SettingField(label: "Downloads per account", help: "Assets held at once across a user's devices.", value: \.maxDownloadsPerAccount),
        SettingField(label: "Copies per account", help: "Copies of one asset held at once by a user.", value: \.maxCopiesPerAccount),
        SettingField(label: "Lifetime downloads per asset", help: "Times a user may ever download one asset.", value: \.maxLifetimeDownloadsPerAsset),
        SettingField(label: "Expiry after download (s)", help: "Playable this long after the download completes.", value: \.expiryAfterDownloadSeconds),
        SettingField(label: "Expiry after first play (s)", help: "Playable this long after the first play.", value: \.expiryAfterPlaySeconds),
        SettingField(label: "Offline viewing period (s)", help: "Longest time without a sync before playback stops.", value: \.offlineViewingPeriodSeconds),
    ] }

    /// Every field by name: the form's fields are the settings listed above.
    struct SettingsForm: ConsoleForm {
        let values: [String: String]
        var csrf: String? { values["csrf"] }

        init(from decoder: any Decoder) throws {
            values = try [String: String](from: decoder)
        }
    }

    struct SettingLine {
        let name: String
        let label: String
        let help: String
        let value: String
        let error: String?
    }

    struct SettingsModel {
        let fields: [SettingLine]
        /// The user-token form below the settings.
        let identity: UserIdentityModel
        /// The push credentials' forms below it.
        let push: PushModel
    }

    /// The settings page's model: the parts given (a form as typed, with its error), the others
    /// as stored.
    func settingsModel(
        _ applicationId: String, fields: [SettingLine]? = nil, identity: UserIdentityModel? = nil, push: PushModel? = nil
    ) async throws -> SettingsModel {
        let fields = if let fields { fields } else { try await settingLines(applicationId) }
        let identity = if let identity { identity } else { try await userIdentityModel(applicationId) }
        let push = if let push { push } else { try await pushModel(applicationId) }
        return SettingsModel(fields: fields, identity: identity, push: push)
    }

    @Sendable func settingsPage(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        try context.session.require(.admin, toDo: "The settings page")
        let lines = try await settingLines(context.applicationId)
        return renderer.page(
            "settings", title: "Settings", model: try await settingsModel(context.applicationId, fields: lines),
            session: context.session, current: .settings)
    }

    /// Every field is read and checked by the settings service, as `PATCH /v1/admin/settings`
    /// would; a refusal shows the form again as typed, the reason next to the field it names.
    @Sendable func saveSettings(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        let form = try await context.form(SettingsForm.self, from: request, needs: .admin, toDo: "Changing settings").values
        var update = ApplicationSettingsUpdate()
        var errors: [String: String] = [:]
        for field in Self.settingFields {
            let text = (form[field.name] ?? "").trimmingCharacters(in: .whitespaces)
            guard let value = Int(text) else {
                errors[field.name] = text.isEmpty ? "Enter a whole number." : "“\(text)” is not a whole number."
                continue
            }
            update[dynamicMember: field.value] = value
        }
        if errors.isEmpty {
            do {
                _ = try await services.applications.updateSettings(applicationId: context.applicationId, update)
                let lines = try await settingLines(context.applicationId)
                return renderer.page(
                    "settings", title: "Settings",
                    model: try await settingsModel(context.applicationId, fields: lines),
                    session: context.session, current: .settings,
                    notice: "Settings saved. Devices receive them at their next sync.")
            } catch let error as ServiceError where error.code == .validationFailed {
                guard case .string(let name)? = error.details?["field"] else { throw error }
                errors[name] = error.message
            }
        }
        let lines = Self.settingFields.map { field in
            SettingLine(name: field.name, label: field.label, help: field.help, value: form[field.name] ?? "", error: errors[field.name])
        }
        return renderer.page(
            "settings", title: "Settings", model: try await settingsModel(context.applicationId, fields: lines),
            session: context.session, current: .settings, notice: "Nothing was saved: correct the fields marked below.", status: .badRequest)
    }

    func settingLines(_ applicationId: String) async throws -> [SettingLine] {
        let settings = try await services.applications.settings(applicationId: applicationId)
        return Self.settingFields.map { field in
            SettingLine(name: field.name, label: field.label, help: field.help, value: String(settings[keyPath: field.value]), error: nil)
        }
    }

    // MARK: tokens and keys

    struct TokenLine {
        let tokenId: String
        let name: String
        let scope: String
        let created: String
        let expires: String
        let lastUsed: String
        let state: String
        let revokeAction: String?
    }

    struct KeyLine {
        let keyId: String
        let created: String
        let lastUsed: String
        let state: String
        let revokeAction: String?
    }

    struct CreatedSecret {
        let label: String
        let secret: String
    }

    struct CredentialsModel {
        let tokens: [TokenLine]
        let keys: [KeyLine]
        let created: CreatedSecret?
    }

    @Sendable func credentialsPage(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        try context.session.require(.admin, toDo: "The tokens and keys page")
        return try await credentials(context, created: nil)
    }

    private func credentials(_ context: ConsoleRequestContext, created: CreatedSecret?, status: HTTPResponse.Status = .ok) async throws -> Response {
        let applicationId = context.applicationId
        let now = services.now()
        let tokens = try await services.applications.tokens(applicationId: applicationId).map { token in
            let expired = token.expiresAt.map { $0 <= now } ?? false
            return TokenLine(
                tokenId: token.tokenId, name: token.name, scope: token.scope.rawValue, created: ConsoleFormat.time(token.createdAt),
                expires: token.expiresAt.map(ConsoleFormat.time) ?? "never", lastUsed: ConsoleFormat.time(token.lastUsedAt),
                state: token.revokedAt != nil ? "revoked" : expired ? "expired" : "active",
                revokeAction: token.revokedAt == nil ? "/console/tokens/\(ConsoleFormat.encoded(token.tokenId))/revoke" : nil)
        }
        let keys = try await services.applications.appKeys(applicationId: applicationId).map { key in
            KeyLine(
                keyId: key.keyId, created: ConsoleFormat.time(key.createdAt), lastUsed: ConsoleFormat.time(key.lastUsedAt),
                state: key.revokedAt == nil ? "active" : "revoked",
                revokeAction: key.revokedAt == nil ? "/console/keys/\(ConsoleFormat.encoded(key.keyId))/revoke" : nil)
        }
        return renderer.page(
            "tokens", title: "Tokens and keys", model: CredentialsModel(tokens: tokens, keys: keys, created: created), session: context.session,
            current: .tokens, status: status)
    }

    struct TokenForm: ConsoleForm {
        let csrf: String?
        let name: String
        let scope: String
        let expiresInDays: String?
    }

    /// The new token is in this answer and nowhere else: it is not redirected to, and only its
    /// hash is stored.
    @Sendable func createToken(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        let form = try await context.form(TokenForm.self, from: request, needs: .admin, toDo: "Creating a token")
        guard let scope = TokenScope.known(form.scope), scope != .admin else {
            throw ServiceError.validation("The console makes cms and reporting tokens; admin tokens come from 'backplane token create'.", field: "scope")
        }
        var expiresAt: Date?
        if let days = form.expiresInDays?.trimmingCharacters(in: .whitespaces), !days.isEmpty {
            guard let count = Int(days), (1...3650).contains(count) else {
                throw ServiceError.validation("'Expires in days' must be a whole number from 1 to 3650.", field: "expiresInDays")
            }
            expiresAt = services.now().addingTimeInterval(Double(count) * 86400)
        }
        let created = try await services.applications.issueToken(
            applicationId: context.applicationId, scope: scope, name: form.name, expiresAt: expiresAt, now: services.now())
        return try await credentials(
            context, created: CreatedSecret(label: "New \(scope.rawValue) token “\(form.name)”:", secret: created.token), status: .created)
    }

    @Sendable func createKey(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        _ = try await context.form(FormTokenOnly.self, from: request, needs: .admin, toDo: "Creating an app key")
        let key = try await services.applications.addAppKey(applicationId: context.applicationId, now: services.now())
        return try await credentials(context, created: CreatedSecret(label: "New app key \(key.keyId), secret:", secret: key.secret), status: .created)
    }

    struct RevokeForm: ConsoleForm {
        let csrf: String?
        let confirm: String?
    }

    @Sendable func revokeToken(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        try await revoke(request, context, what: "token", parameter: "tokenId") { id in
            _ = try await services.applications.revokeToken(applicationId: context.applicationId, tokenId: id, now: services.now())
        }
    }

    @Sendable func revokeKey(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        try await revoke(request, context, what: "key", parameter: "keyId") { id in
            _ = try await services.applications.revokeAppKey(applicationId: context.applicationId, keyId: id, now: services.now())
        }
    }

    /// Asks first, like a command: a revoked credential stops working at once and cannot be restored.
    private func revoke(
        _ request: Request, _ context: ConsoleRequestContext, what: String, parameter: String, _ perform: (String) async throws -> Void
    ) async throws -> Response {
        let form = try await context.form(RevokeForm.self, from: request, needs: .admin, toDo: "Revoking a \(what)")
        let id = try context.pathValue(parameter)
        guard ConsoleForms.confirmed(form.confirm) else {
            let model = ConsoleConfirmation(
                question: "Revoke \(what) \(id)? Everything using it is refused from the next request on; this cannot be undone.",
                action: "/console/\(what)s/\(ConsoleFormat.encoded(id))/revoke", button: "Revoke", fields: [], cancelHref: "/console/tokens")
            return renderer.page("confirm", title: "Confirm: revoke", model: model, session: context.session, current: .tokens)
        }
        try await perform(id)
        return Response(status: .seeOther, headers: [.location: "/console/tokens"])
    }
}
