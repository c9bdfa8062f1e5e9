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
