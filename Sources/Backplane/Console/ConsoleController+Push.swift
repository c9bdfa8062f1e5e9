import Foundation
import Hummingbird
import BackplaneWire

/// The push forms of the settings page: what `PUT` and `DELETE /v1/admin/push/apns|fcm` do.
/// Keys go in and are never shown again; the page shows what they are for and whether a
/// provider refused them.
extension ConsoleController {
    struct PushModel {
        struct Provider {
            var configured = false
            /// "team T, key K, topic com.example (production)" or "project p".
            var summary = ""
            var setAt = ""
            /// Why the provider refused the credentials, and since when.
            var broken: String?
        }

        var apns = Provider()
        var fcm = Provider()
        /// The APNs form as last typed (the key aside).
        var teamId = ""
        var keyId = ""
        var topic = ""
        var sandbox = false
        /// Why the last save was refused.
        var error: String?
    }

    struct APNsForm: ConsoleForm {
        let csrf: String?
        let teamId: String?
        let keyId: String?
        let topic: String?
        let environment: String?
        let privateKey: String?
    }

    struct FCMForm: ConsoleForm {
        let csrf: String?
        let serviceAccount: String?
    }

    func pushModel(_ applicationId: String) async throws -> PushModel {
        let stored = try await services.pushCredentials.configuration(applicationId: applicationId)
        var model = PushModel()
        func broken(_ broken: PushCredentialsBroken?) -> String? {
            broken.map { "Refused by the provider since \(ConsoleFormat.time($0.since)): \($0.reason). Nothing is pushed until new credentials are set." }
        }
        if let apns = stored.apns {
            model.apns = .init(
                configured: true, summary: "team \(apns.teamId), key \(apns.keyId), topic \(apns.topic) (\(apns.environment.rawValue))",
                setAt: ConsoleFormat.time(apns.setAt), broken: broken(apns.broken))
            (model.teamId, model.keyId, model.topic, model.sandbox) = (apns.teamId, apns.keyId, apns.topic, apns.environment == .sandbox)
        }
        if let fcm = stored.fcm {
            model.fcm = .init(configured: true, summary: "project \(fcm.projectId)", setAt: ConsoleFormat.time(fcm.setAt), broken: broken(fcm.broken))
        }
        return model
    }

    @Sendable func savePushAPNs(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        let form = try await context.form(APNsForm.self, from: request, needs: .admin, toDo: "Changing push credentials")
        func text(_ value: String?) -> String { (value ?? "").trimmingCharacters(in: .whitespacesAndNewlines) }
        let update = APNsCredentialsUpdate(
            teamId: text(form.teamId), keyId: text(form.keyId), privateKey: text(form.privateKey), topic: text(form.topic),
            environment: form.environment == "sandbox" ? .sandbox : .production)
        return try await savePush(context, provider: "APNs") {
            _ = try await services.pushCredentials.setAPNs(applicationId: context.applicationId, update)
        } typed: { model in
            (model.teamId, model.keyId, model.topic, model.sandbox) = (update.teamId, update.keyId, update.topic, update.environment == .sandbox)
        }
    }

    @Sendable func savePushFCM(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        let form = try await context.form(FCMForm.self, from: request, needs: .admin, toDo: "Changing push credentials")
        return try await savePush(context, provider: "FCM") {
            guard let account = try? JSONDecoder().decode(JSONValue.self, from: Data((form.serviceAccount ?? "").utf8)) else {
                throw ServiceError.validation("The service account is not JSON: paste the whole key file Google's console downloads.", field: "serviceAccount")
            }
            _ = try await services.pushCredentials.setFCM(applicationId: context.applicationId, FCMCredentialsUpdate(serviceAccount: account))
        } typed: { _ in }
    }

    @Sendable func deletePushAPNs(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        try await deletePush(request, context: context, provider: .apns)
    }

    @Sendable func deletePushFCM(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        try await deletePush(request, context: context, provider: .fcm)
    }

    /// Saves through the service; a refusal shows the page again with the reason and the form as
    /// typed (never the key).
    private func savePush(
        _ context: ConsoleRequestContext, provider: String, save: () async throws -> Void, typed: (inout PushModel) -> Void
    ) async throws -> Response {
        do {
            try await save()
            return try await settingsPage(context, notice: "\(provider) credentials saved. Devices are pushed with them from now on.")
        } catch let error as ServiceError where error.code == .validationFailed {
            var model = try await pushModel(context.applicationId)
            typed(&model)
            model.error = error.message
            return renderer.page(
                "settings", title: "Settings", model: try await settingsModel(context.applicationId, push: model),
                session: context.session, current: .settings, notice: "\(provider) credentials were not saved: \(error.message)", status: .badRequest)
        }
    }

    private func deletePush(_ request: Request, context: ConsoleRequestContext, provider: PushProvider) async throws -> Response {
        _ = try await context.form(FormTokenOnly.self, from: request, needs: .admin, toDo: "Changing push credentials")
        do {
            try await services.pushCredentials.delete(applicationId: context.applicationId, provider: provider)
        } catch let error as ServiceError where error.code == .notFound {}
        let name = provider == .apns ? "APNs" : "FCM"
        return try await settingsPage(context, notice: "\(name) credentials removed: those devices are no longer pushed.")
    }
}
