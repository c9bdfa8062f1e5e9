import Foundation
import Hummingbird
import BackplaneWire

/// Assets' content keys (bearer, admin scope): set, generate (shown once), list key ids.
struct ContentKeysController {
    let contentKeys: ContentKeyService

    func addAdminRoutes(to group: RouterGroup<TokenRequestContext>) {
        group
            .put("assets/:assetId/keys", use: set)
            .post("assets/:assetId/keys", use: generate)
            .get("assets/:assetId/keys", use: list)
    }

    @Sendable func set(_ request: Request, context: TokenRequestContext) async throws -> ContentKeyList {
        let body = try await request.decode(as: ContentKeysRequest.self, context: context)
        return try await contentKeys.set(applicationId: context.applicationId, assetId: try context.pathValue("assetId"), body)
    }

    @Sendable func generate(_ request: Request, context: TokenRequestContext) async throws -> EditedResponse<GeneratedContentKey> {
        EditedResponse(
            status: .created,
            response: try await contentKeys.generate(applicationId: context.applicationId, assetId: try context.pathValue("assetId")))
    }

    @Sendable func list(_ request: Request, context: TokenRequestContext) async throws -> ContentKeyList {
        try await contentKeys.list(applicationId: context.applicationId, assetId: try context.pathValue("assetId"))
    }
}
