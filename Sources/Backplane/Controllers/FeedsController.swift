import Foundation
import Hummingbird
import Shared

/// The CMS API (bearer token with scope `cms`): feeds and episodes.
struct CMSController {
    let feeds: FeedService
    let store: any BackplaneStore

    func addRoutes(to router: Router<BackplaneRequestContext>) {
        router.group("v1/cms/feeds")
            .add(middleware: BearerTokenMiddleware(store: store, scope: .cms))
            .get(use: list)
            .get(":feedId", use: feed)
            .put(":feedId", use: put)
            .delete(":feedId", use: delete)
            .post(":feedId/episodes", use: publish)
            .put(":feedId/episodes/:assetId", use: updateEpisode)
            .delete(":feedId/episodes/:assetId", use: retractEpisode)
    }

    @Sendable func list(_ request: Request, context: BackplaneRequestContext) async throws -> FeedList {
        try await feeds.feeds(applicationId: try context.requireApplicationId())
    }

    @Sendable func feed(_ request: Request, context: BackplaneRequestContext) async throws -> Feed {
        try await feeds.feed(applicationId: try context.requireApplicationId(), feedId: try context.pathValue("feedId"))
    }

    @Sendable func put(_ request: Request, context: BackplaneRequestContext) async throws -> EditedResponse<Feed> {
        let input = try await request.decode(as: FeedInput.self, context: context)
        let (feed, created) = try await feeds.putFeed(applicationId: try context.requireApplicationId(), feedId: try context.pathValue("feedId"), input)
        return EditedResponse(status: created ? .created : .ok, response: feed)
    }

    @Sendable func delete(_ request: Request, context: BackplaneRequestContext) async throws -> HTTPResponse.Status {
        try await feeds.deleteFeed(applicationId: try context.requireApplicationId(), feedId: try context.pathValue("feedId"))
        return .noContent
    }

    @Sendable func publish(_ request: Request, context: BackplaneRequestContext) async throws -> EpisodeList {
        let body = try await request.decode(as: PublishEpisodesRequest.self, context: context)
        return try await feeds.publish(applicationId: try context.requireApplicationId(), feedId: try context.pathValue("feedId"), body)
    }

    @Sendable func updateEpisode(_ request: Request, context: BackplaneRequestContext) async throws -> Episode {
        let body = try await request.decode(as: EpisodeInput.self, context: context)
        return try await feeds.updateEpisode(
            applicationId: try context.requireApplicationId(), feedId: try context.pathValue("feedId"),
            assetId: try context.pathValue("assetId"), body)
    }

    @Sendable func retractEpisode(_ request: Request, context: BackplaneRequestContext) async throws -> HTTPResponse.Status {
        try await feeds.retractEpisode(
            applicationId: try context.requireApplicationId(), feedId: try context.pathValue("feedId"), assetId: try context.pathValue("assetId"))
        return .noContent
    }
}

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

/// Query parameter parsing with the API's error body.
enum QueryValue {
    static func int(_ text: String?, name: String) throws -> Int? {
        guard let text else { return nil }
        guard let value = Int(text) else { throw BackplaneError.badRequest("'\(name)' must be an integer.") }
        return value
    }

    static func date(_ text: String?, name: String) throws -> Date? {
        guard let text else { return nil }
        guard let date = try? Date(text, strategy: .iso8601) else {
            throw BackplaneError.badRequest("'\(name)' must be an RFC 3339 date such as 2026-01-01T00:00:00Z.")
        }
        try Validate.date(date, field: name)
        return date
    }

    static func bool(_ text: String?, name: String) throws -> Bool? {
        switch text {
        case nil: return nil
        case "true", "1": return true
        case "false", "0": return false
        default: throw BackplaneError.badRequest("'\(name)' must be true or false.")
        }
    }
}

extension BackplaneRequestContext {
    /// A path parameter, percent-decoded.
    func pathValue(_ name: String) throws -> String {
        let raw = try parameters.require(name)
        return raw.removingPercentEncoding ?? raw
    }
}

extension Feed: ResponseEncodable {}
extension FeedList: ResponseEncodable {}
extension Episode: ResponseEncodable {}
extension EpisodeList: ResponseEncodable {}
extension SubscribeResponse: ResponseEncodable {}
extension SubscriptionList: ResponseEncodable {}
extension EpisodeChanges: ResponseEncodable {}
