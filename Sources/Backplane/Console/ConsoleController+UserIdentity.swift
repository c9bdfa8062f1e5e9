import Foundation
import Hummingbird
import BackplaneWire

/// The user-token form of the settings page: what `PUT` and `DELETE /v1/admin/user-identity` do.
extension ConsoleController {
    /// The form as shown: the stored configuration, or what was typed when it was refused.
    struct UserIdentityModel {
        var configured = false
        var required = false
        var issuer = ""
        var audience = ""
        var jwks = ""
        var jwksUrl = ""
        var secretSet = false
        /// Why the last save was refused.
        var error: String?
        var jwksUrlAllowed = false
    }

    struct UserIdentityForm: ConsoleForm {
        let csrf: String?
        let required: String?
        let issuer: String?
        let audience: String?
        let jwks: String?
        let jwksUrl: String?
        let hs256Secret: String?
        let removeSecret: String?
    }

    func userIdentityModel(_ applicationId: String) async throws -> UserIdentityModel {
        var model = UserIdentityModel(jwksUrlAllowed: services.userIdentity.options.allowJWKSURL)
        guard let stored = try await services.userIdentity.configuration(applicationId: applicationId).configuration else { return model }
        model.configured = true
        model.required = stored.required
        model.issuer = stored.issuer
        model.audience = stored.audience
        model.jwks = stored.jwks.flatMap(Self.prettyJSON) ?? ""
        model.jwksUrl = stored.jwksUrl ?? ""
        model.secretSet = stored.hs256SecretSet
        return model
    }

    /// Checked by the service as `PUT /v1/admin/user-identity` would be; a refusal shows the
    /// form again as typed (the secret aside), with the reason.
    @Sendable func saveUserIdentity(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        let form = try await context.form(UserIdentityForm.self, from: request, needs: .admin, toDo: "Changing user tokens")
        func text(_ value: String?) -> String { (value ?? "").trimmingCharacters(in: .whitespacesAndNewlines) }
        var typed = UserIdentityModel(
            configured: true, required: form.required != nil, issuer: text(form.issuer), audience: text(form.audience), jwks: text(form.jwks),
            jwksUrl: text(form.jwksUrl), jwksUrlAllowed: services.userIdentity.options.allowJWKSURL)
        do {
            var jwks: JSONValue?
            if !typed.jwks.isEmpty {
                guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(typed.jwks.utf8)) else {
                    throw ServiceError.validation("The key set is not JSON: paste the JSON Web Key Set ({\"keys\": [...]}).", field: "jwks")
                }
                jwks = value
            }
            let secret = text(form.hs256Secret)
            let update = UserIdentityUpdate(
                required: typed.required, issuer: typed.issuer, audience: typed.audience, jwks: jwks,
                jwksUrl: typed.jwksUrl.isEmpty ? nil : typed.jwksUrl,
                hs256Secret: form.removeSecret != nil ? "" : (secret.isEmpty ? nil : secret))
            _ = try await services.userIdentity.set(applicationId: context.applicationId, update)
            return try await settingsPage(context, notice: "User tokens saved. Registrations are checked this way from now on.")
        } catch let error as ServiceError where [.validationFailed, .forbidden].contains(error.code) {
            typed.error = error.message
            typed.secretSet = (try? await services.userIdentity.configuration(applicationId: context.applicationId).configuration?.hs256SecretSet) ?? false
            return renderer.page(
                "settings", title: "Settings", model: try await settingsModel(context.applicationId, identity: typed),
                session: context.session, current: .settings, notice: "User tokens were not saved: \(error.message)", status: .badRequest)
        }
    }

    @Sendable func deleteUserIdentity(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        _ = try await context.form(FormTokenOnly.self, from: request, needs: .admin, toDo: "Changing user tokens")
        do {
            try await services.userIdentity.delete(applicationId: context.applicationId)
        } catch let error as ServiceError where error.code == .notFound {}
        return try await settingsPage(context, notice: "User tokens removed: registrations need none from now on.")
    }

    func settingsPage(_ context: ConsoleRequestContext, notice: String) async throws -> Response {
        renderer.page(
            "settings", title: "Settings", model: try await settingsModel(context.applicationId),
            session: context.session, current: .settings, notice: notice)
    }

    private static func prettyJSON(_ value: JSONValue) -> String? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) }
    }
}
