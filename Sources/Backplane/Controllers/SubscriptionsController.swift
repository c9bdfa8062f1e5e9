import Foundation
import Hummingbird
import BackplaneWire

/// The device's subscriptions (signed, with the device credential).
struct SubscriptionsController {
    let subscriptions: SubscriptionService

    /// Routes under `/v1`, in a group signed by the device.
    func addRoutes(to group: RouterGroup<DeviceRequestContext>) {
        group
            .get("subscriptions", use: list)
            .get("subscriptions/changes", use: changes)
            .put("subscriptions/:feedId", use: subscribe)
            .delete("subscriptions/:feedId", use: unsubscribe)
            .get("feeds/episodes", use: episodesSince)
    }

    @Sendable func list(_ request: Request, context: DeviceRequestContext) async throws -> SubscriptionList {
        let me = context.device
        return try await subscriptions.subscriptions(applicationId: me.applicationId, deviceId: me.deviceId)
    }

    @Sendable func subscribe(_ request: Request, context: DeviceRequestContext) async throws -> SubscribeResponse {
        let me = context.device
        let body = try await request.decode(as: SubscribeRequest.self, context: context, orIfEmpty: SubscribeRequest())
        return try await subscriptions.subscribe(applicationId: me.applicationId, deviceId: me.deviceId, feedId: try context.pathValue("feedId"), body)
    }

    @Sendable func unsubscribe(_ request: Request, context: DeviceRequestContext) async throws -> HTTPResponse.Status {
        let me = context.device
        try await subscriptions.unsubscribe(applicationId: me.applicationId, deviceId: me.deviceId, feedId: try context.pathValue("feedId"))
        return .noContent
    }

    @Sendable func changes(_ request: Request, context: DeviceRequestContext) async throws -> EpisodeChanges {
        let me = context.device
        let query = request.uri.queryParameters
        return try await subscriptions.changes(
            applicationId: me.applicationId, deviceId: me.deviceId, cursor: query["cursor"].map(String.init),
            limit: try QueryValue.int(query["limit"].map(String.init), name: "limit"))
    }

    @Sendable func episodesSince(_ request: Request, context: DeviceRequestContext) async throws -> EpisodeList {
        let me = context.device
        let query = request.uri.queryParameters
        guard let since = try QueryValue.date(query["since"].map(String.init), name: "since") else {
            throw ServiceError.badRequest("'since' (an RFC 3339 date) is required.")
        }
        return try await subscriptions.episodes(
            applicationId: me.applicationId, deviceId: me.deviceId, since: since,
            onlySubscribed: try QueryValue.bool(query["onlySubscribed"].map(String.init), name: "onlySubscribed") ?? true,
            cursor: query["cursor"].map(String.init), limit: try QueryValue.int(query["limit"].map(String.init), name: "limit"))
    }
}
