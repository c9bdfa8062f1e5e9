import Foundation
import Hummingbird
import BackplaneWire

/// The CMS API (bearer token with scope `cms`): feeds and episodes.
struct CMSController {
    let feeds: FeedService

    func addRoutes(to group: RouterGroup<TokenRequestContext>) {
        group
            .get(use: list)
            .get(":feedId", use: feed)
            .put(":feedId", use: put)
            .delete(":feedId", use: delete)
            .post(":feedId/episodes", use: publish)
            .put(":feedId/episodes/:assetId", use: updateEpisode)
            .delete(":feedId/episodes/:assetId", use: retractEpisode)
    }

    @Sendable func list(_ request: Request, context: TokenRequestContext) async throws -> FeedList {
        try await feeds.feeds(applicationId: context.applicationId)
    }

    @Sendable func feed(_ request: Request, context: TokenRequestContext) async throws -> Feed {
        try await feeds.feed(applicationId: context.applicationId, feedId: try context.pathValue("feedId"))
    }

    @Sendable func put(_ request: Request, context: TokenRequestContext) async throws -> EditedResponse<Feed> {
        let input = try await request.decode(as: FeedInput.self, context: context)
        let (feed, created) = try await feeds.putFeed(applicationId: context.applicationId, feedId: try context.pathValue("feedId"), input)
        return EditedResponse(status: created ? .created : .ok, response: feed)
    }

    @Sendable func delete(_ request: Request, context: TokenRequestContext) async throws -> HTTPResponse.Status {
        try await feeds.deleteFeed(applicationId: context.applicationId, feedId: try context.pathValue("feedId"))
        return .noContent
    }

    @Sendable func publish(_ request: Request, context: TokenRequestContext) async throws -> EpisodeList {
        let body = try await request.decode(as: PublishEpisodesRequest.self, context: context)
        return try await feeds.publish(applicationId: context.applicationId, feedId: try context.pathValue("feedId"), body)
    }

    @Sendable func updateEpisode(_ request: Request, context: TokenRequestContext) async throws -> Episode {
        let body = try await request.decode(as: EpisodeInput.self, context: context)
        return try await feeds.updateEpisode(
            applicationId: context.applicationId, feedId: try context.pathValue("feedId"),
            assetId: try context.pathValue("assetId"), body)
    }

    @Sendable func retractEpisode(_ request: Request, context: TokenRequestContext) async throws -> HTTPResponse.Status {
        try await feeds.retractEpisode(
            applicationId: context.applicationId, feedId: try context.pathValue("feedId"), assetId: try context.pathValue("assetId"))
        return .noContent
    }
}
