import Foundation
import Hummingbird
import Shared

/// The device's subscriptions (signed, with the device credential).
struct SubscriptionsController {
    let subscriptions: SubscriptionService
    let signedByDevice: SignedRequestMiddleware

    func addRoutes(to router: Router<BackplaneRequestContext>) {
        router.group("v1/subscriptions")
            .add(middleware: signedByDevice)
            .get(use: list)
            .get("changes", use: changes)
            .put(":feedId", use: subscribe)
            .delete(":feedId", use: unsubscribe)
        router.group("v1/feeds")
            .add(middleware: signedByDevice)
            .get("episodes", use: episodesSince)
    }

    @Sendable func list(_ request: Request, context: BackplaneRequestContext) async throws -> SubscriptionList {
        let me = try context.requireDevice()
        return try await subscriptions.subscriptions(applicationId: me.applicationId, deviceId: me.deviceId)
    }

    @Sendable func subscribe(_ request: Request, context: BackplaneRequestContext) async throws -> SubscribeResponse {
        let me = try context.requireDevice()
        let body = try await request.decode(as: SubscribeRequest.self, context: context, orIfEmpty: SubscribeRequest())
        return try await subscriptions.subscribe(applicationId: me.applicationId, deviceId: me.deviceId, feedId: try context.pathValue("feedId"), body)
    }

    @Sendable func unsubscribe(_ request: Request, context: BackplaneRequestContext) async throws -> HTTPResponse.Status {
        let me = try context.requireDevice()
        try await subscriptions.unsubscribe(applicationId: me.applicationId, deviceId: me.deviceId, feedId: try context.pathValue("feedId"))
        return .noContent
    }

    @Sendable func changes(_ request: Request, context: BackplaneRequestContext) async throws -> EpisodeChanges {
        let me = try context.requireDevice()
        let query = request.uri.queryParameters
        return try await subscriptions.changes(
            applicationId: me.applicationId, deviceId: me.deviceId, cursor: query["cursor"].map(String.init),
            limit: try QueryValue.int(query["limit"].map(String.init), name: "limit"))
    }

    @Sendable func episodesSince(_ request: Request, context: BackplaneRequestContext) async throws -> EpisodeList {
        let me = try context.requireDevice()
        let query = request.uri.queryParameters
        guard let since = try QueryValue.date(query["since"].map(String.init), name: "since") else {
            throw BackplaneError.badRequest("'since' (an RFC 3339 date) is required.")
        }
        return try await subscriptions.episodes(
            applicationId: me.applicationId, deviceId: me.deviceId, since: since,
            onlySubscribed: try QueryValue.bool(query["onlySubscribed"].map(String.init), name: "onlySubscribed") ?? true,
            cursor: query["cursor"].map(String.init), limit: try QueryValue.int(query["limit"].map(String.init), name: "limit"))
    }
}
