import Foundation
import Hummingbird
import BackplaneWire

/// `/v1/admin/push`: the application's APNs and FCM credentials (bearer token with scope
/// `admin`). Secrets go in and never come out: the answers show the ids, the topic, the project
/// and when each was set, and whether a provider refused them.
struct PushCredentialsController {
    let credentials: PushCredentialsService

    func addRoutes(to group: RouterGroup<TokenRequestContext>) {
        group
            .get("push", use: configuration)
            .get("push/apns", use: apns)
            .put("push/apns", use: setAPNs)
            .delete("push/apns", use: deleteAPNs)
            .get("push/fcm", use: fcm)
            .put("push/fcm", use: setFCM)
            .delete("push/fcm", use: deleteFCM)
    }

    @Sendable func configuration(_ request: Request, context: TokenRequestContext) async throws -> PushConfigurationResponse {
        try await credentials.configuration(applicationId: context.applicationId)
    }

    @Sendable func apns(_ request: Request, context: TokenRequestContext) async throws -> APNsConfiguration {
        guard let apns = try await credentials.configuration(applicationId: context.applicationId).apns else {
            throw ServiceError.notFound("The application has no apns credentials.")
        }
        return apns
    }

    @Sendable func fcm(_ request: Request, context: TokenRequestContext) async throws -> FCMConfiguration {
        guard let fcm = try await credentials.configuration(applicationId: context.applicationId).fcm else {
            throw ServiceError.notFound("The application has no fcm credentials.")
        }
        return fcm
    }

    @Sendable func setAPNs(_ request: Request, context: TokenRequestContext) async throws -> PushConfigurationResponse {
        let body = try await request.decode(as: APNsCredentialsUpdate.self, context: context)
        return try await credentials.setAPNs(applicationId: context.applicationId, body)
    }

    @Sendable func setFCM(_ request: Request, context: TokenRequestContext) async throws -> PushConfigurationResponse {
        let body = try await request.decode(as: FCMCredentialsUpdate.self, context: context)
        return try await credentials.setFCM(applicationId: context.applicationId, body)
    }

    @Sendable func deleteAPNs(_ request: Request, context: TokenRequestContext) async throws -> HTTPResponse.Status {
        try await credentials.delete(applicationId: context.applicationId, provider: .apns)
        return .noContent
    }

    @Sendable func deleteFCM(_ request: Request, context: TokenRequestContext) async throws -> HTTPResponse.Status {
        try await credentials.delete(applicationId: context.applicationId, provider: .fcm)
        return .noContent
    }
}
