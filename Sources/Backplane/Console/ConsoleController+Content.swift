import Foundation
import Hummingbird
import NIOCore
import BackplaneWire

/// Feeds (CMS tokens publish and retract; admin tokens look) and the event log (reporting and
/// admin tokens).
extension ConsoleController {
    func addContentRoutes(to group: RouterGroup<ConsoleRequestContext>) {
        group
            .get("feeds", use: feedList)
            .get("feeds/:feedId", use: feedPage)
            .post("feeds/:feedId/episodes", use: publishEpisode)
            .post("feeds/:feedId/episodes/:assetId/retract", use: retractEpisode)
            .get("events", use: eventsPage)
            .get("events/export", use: exportEvents)
    }

    private func requireFeedReader(_ session: BrowserSession) throws {
        if session.scope != .admin { try session.require(.cms, toDo: "The feeds pages") }
    }

    private func requireEventReader(_ session: BrowserSession) throws {
        if session.scope != .admin { try session.require(.reporting, toDo: "The event log") }
    }

    // MARK: feeds

    struct FeedLine {
        let feedId: String
        let href: String
        let title: String
        let subscribers: Int
        let updated: String
    }

    struct FeedsModel {
        let feeds: [FeedLine]
    }

    @Sendable func feedList(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        try requireFeedReader(context.session)
        let applicationId = context.applicationId
        var lines: [FeedLine] = []
        // An application has tens of feeds, not thousands: the CMS API lists them whole too.
        for feed in try await services.feeds.feeds(applicationId: applicationId).feeds {
            lines.append(FeedLine(
                feedId: feed.feedId, href: ConsolePaths.feed(feed.feedId), title: feed.title,
                subscribers: try await services.subscriptions.subscriberCount(applicationId: applicationId, feedId: feed.feedId),
                updated: ConsoleFormat.time(feed.updatedAt)))
        }
        return renderer.page("feeds", title: "Feeds", model: FeedsModel(feeds: lines), session: context.session, current: .feeds)
    }

    struct EpisodeLine {
        let assetId: String
        let title: String
        let publishDate: String
        let expiryDate: String
        let updated: String
        let retractAction: String?
    }

    struct FeedModel {
        let title: String
        let subscribers: Int
        let canEdit: Bool
        let publishAction: String
        let episodes: [EpisodeLine]
        let next: String?
    }

    @Sendable func feedPage(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        try requireFeedReader(context.session)
        let feedId = try context.pathValue("feedId")
        let applicationId = context.applicationId
        let feed = try await services.feeds.feed(applicationId: applicationId, feedId: feedId)
        let (page, nextCursor) = try await services.feeds.episodePage(
            applicationId: applicationId, feedId: feedId, cursor: try ConsoleForms.query(request)["cursor"])
        let canEdit = context.session.scope == .cms
        let path = ConsolePaths.feed(feedId)
        let model = FeedModel(
            title: feed.title, subscribers: try await services.subscriptions.subscriberCount(applicationId: applicationId, feedId: feedId),
            canEdit: canEdit, publishAction: path + "/episodes",
            episodes: page.map { row in
                EpisodeLine(
                    assetId: row.assetId, title: row.episode.title ?? "", publishDate: ConsoleFormat.time(row.episode.publishDate),
                    expiryDate: ConsoleFormat.time(row.episode.expiryDate), updated: ConsoleFormat.time(row.updatedAt),
                    retractAction: canEdit ? "\(path)/episodes/\(ConsoleFormat.encoded(row.assetId))/retract" : nil)
            },
            next: nextCursor.map { ConsoleFormat.link(path, [("cursor", $0)]) })
        return renderer.page("feed", title: "Feed \(feedId)", model: model, session: context.session, current: .feeds)
    }

    struct EpisodeForm: ConsoleForm {
        let csrf: String?
        let assetId: String
        let title: String?
        let downloadURL: String?
    }

    /// Publishes (or replaces) one episode, as `POST /v1/cms/feeds/{feedId}/episodes` would; the
    /// feed's subscribers are woken by the feed service.
    @Sendable func publishEpisode(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        let form = try await context.form(EpisodeForm.self, from: request, needs: .cms, toDo: "Publishing an episode")
        let feedId = try context.pathValue("feedId")
        func optional(_ text: String?) -> String? { text.flatMap { $0.isEmpty ? nil : $0 } }
        try Validate.identifier(form.assetId, field: "assetId")
        // The form holds three of an episode's fields; publishing over a live episode would drop
        // the others (its window, types, custom fields). Updates go through the CMS API.
        if try await services.feeds.hasLiveEpisode(applicationId: context.applicationId, feedId: feedId, assetId: form.assetId) {
            throw ServiceError.conflict(
                "Episode '\(form.assetId)' is already published in this feed. Retract it first, or update it with PUT /v1/cms/feeds/{feedId}/episodes/{assetId}.")
        }
        let episode = EpisodeInput(assetId: form.assetId, title: optional(form.title), downloadURL: optional(form.downloadURL))
        _ = try await services.feeds.publish(applicationId: context.applicationId, feedId: feedId, PublishEpisodesRequest(episodes: [episode]))
        return Response(status: .seeOther, headers: [.location: ConsolePaths.feed(feedId)])
    }

    @Sendable func retractEpisode(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        _ = try await context.form(FormTokenOnly.self, from: request, needs: .cms, toDo: "Retracting an episode")
        let feedId = try context.pathValue("feedId")
        try await services.feeds.retractEpisode(applicationId: context.applicationId, feedId: feedId, assetId: try context.pathValue("assetId"))
        return Response(status: .seeOther, headers: [.location: ConsolePaths.feed(feedId)])
    }

    // MARK: events

    struct EventLine {
        let time: String
        let type: String
        let deviceId: String
        let deviceHref: String?
        let userId: String
        let assetId: String
        let detail: String
    }

    struct EventsModel {
        let userId: String
        let deviceId: String
        let from: String
        let to: String
        let types: [FilterOption]
        let filterError: String?
        let csvHref: String
        let ndjsonHref: String
        let chart: DailyChart?
        let rows: [EventLine]
        let next: String?
    }

    @Sendable func eventsPage(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        try requireEventReader(context.session)
        let query = try ConsoleForms.query(request)
        func text(_ name: String) -> String { query[name] ?? "" }
        let fields = ["userId", "deviceId", "type", "from", "to"].map { ($0, text($0)) }
        func page(filterError: String?, chart: DailyChart?, rows: [EventLine], next: String?, status: HTTPResponse.Status) -> Response {
            let model = EventsModel(
                userId: text("userId"), deviceId: text("deviceId"), from: text("from"), to: text("to"),
                types: EventType.allCases.map { FilterOption(value: $0.rawValue, selected: $0.rawValue == text("type")) },
                filterError: filterError, csvHref: ConsoleFormat.link("/console/events/export", fields + [("format", "csv")]),
                ndjsonHref: ConsoleFormat.link("/console/events/export", fields + [("format", "ndjson")]), chart: chart, rows: rows, next: next)
            return renderer.page("events", title: "Events", model: model, session: context.session, current: .events, status: status)
        }
        let filter: EventFilter
        do {
            filter = try EventFilter(named: { query[$0] })
            try EventService.validate(filter)
        } catch let error as ServiceError {
            return page(filterError: error.message, chart: nil, rows: [], next: nil, status: error.code.httpStatus)
        }
        let applicationId = context.applicationId
        let events = try await services.events.list(applicationId: applicationId, filter: filter, cursor: query["cursor"], limit: nil)
        // The chart ends with the filter's end (now when it names none) and covers its period,
        // or two weeks when it names no start, at most 92 days.
        let end = filter.to ?? services.now()
        let lastDay = Calendar.utc.startOfDay(for: end)
        let chartFrom = max(filter.from ?? lastDay.addingTimeInterval(-Double(Self.chartDays - 1) * 86400), lastDay.addingTimeInterval(-91 * 86400))
        let chartDays = max(1, min(92, Int((end.timeIntervalSince(Calendar.utc.startOfDay(for: chartFrom)) / 86400).rounded(.up))))
        var chartFilter = filter
        chartFilter.from = chartFrom
        let counts = try await services.events.counts(applicationId: applicationId, filter: chartFilter)
        let rows = events.events.map { stored in
            EventLine(
                time: ConsoleFormat.time(stored.correctedTime), type: stored.event.content.type.rawValue, deviceId: stored.deviceId,
                deviceHref: context.session.scope == .admin ? ConsolePaths.device(stored.deviceId) : nil, userId: stored.event.userId,
                assetId: stored.event.content.assetId ?? "", detail: Self.detail(stored.event.content))
        }
        let next = events.nextCursor.map { ConsoleFormat.link("/console/events", fields + [("cursor", $0)]) }
        return page(
            filterError: nil, chart: DailyChart(counts: counts.counts, from: Calendar.utc.startOfDay(for: chartFrom), days: chartDays), rows: rows,
            next: next, status: .ok)
    }

    /// The fields of an event worth a glance in a table; the export has them all.
    static func detail(_ content: EventContent) -> String {
        [
            content.errorCode.map { "error \($0)" }, content.errorMessage, content.deletionReason.map { "reason \($0.rawValue)" },
            content.limitType.map { "limit \($0.rawValue)" }, content.customName, content.customString,
        ].compactMap { $0 }.joined(separator: " · ")
    }

    /// The reporting export, behind the console's session instead of a bearer header.
    @Sendable func exportEvents(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        try requireEventReader(context.session)
        let query = try ConsoleForms.query(request)
        let format = try EventExportFormat(query["format"])
        return try Response.eventExport(services.events, applicationId: context.applicationId, filter: try EventFilter(named: { query[$0] }), format: format)
    }
}
