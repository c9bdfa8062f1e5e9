import Foundation
import Hummingbird
import NIOCore
import BackplaneWire

/// The reporting API (bearer token with scope `reporting`): list, count and export events.
struct ReportsController {
    let events: EventService

    func addRoutes(to group: RouterGroup<TokenRequestContext>) {
        group
            .get(use: list)
            .get("counts", use: counts)
            .get("export", use: export)
    }

    @Sendable func list(_ request: Request, context: TokenRequestContext) async throws -> EventPage {
        let query = request.uri.queryParameters
        return try await events.list(
            applicationId: context.applicationId, filter: try Self.filter(request), cursor: query["cursor"].map(String.init),
            limit: try QueryValue.int(query["limit"].map(String.init), name: "limit"))
    }

    @Sendable func counts(_ request: Request, context: TokenRequestContext) async throws -> EventCounts {
        try await events.counts(applicationId: context.applicationId, filter: try Self.filter(request))
    }

    /// Streamed a page at a time; everything that can be refused is checked before the first byte.
    @Sendable func export(_ request: Request, context: TokenRequestContext) async throws -> Response {
        let query = request.uri.queryParameters
        let format = try EventExportFormat(query["format"].map(String.init))
        return try Response.eventExport(events, applicationId: context.applicationId, filter: try Self.filter(request), format: format)
    }

    private static func filter(_ request: Request) throws -> EventFilter {
        let query = request.uri.queryParameters
        return try EventFilter(named: { query[Substring($0)].map(String.init) })
    }
}
