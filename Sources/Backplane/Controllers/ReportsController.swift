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
        let format = try ExportFormat(query["format"].map(String.init))
        let filter = try Self.filter(request)
        try EventService.validate(filter)
        let applicationId = context.applicationId
        let events = events
        var headers = HTTPFields()
        headers[.contentType] = format.contentType
        headers[.contentDisposition] = "attachment; filename=\"events.\(format.rawValue)\""
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            let encoder = WireJSON.encoder()
            if format == .csv { try await writer.write(ByteBuffer(string: EventCSV.header)) }
            try await events.export(applicationId: applicationId, filter: filter) { page in
                var buffer = ByteBuffer()
                for event in page {
                    switch format {
                    case .ndjson:
                        buffer.writeBytes(try encoder.encode(event))
                        buffer.writeString("\n")
                    case .csv:
                        buffer.writeString(EventCSV.row(event))
                    }
                }
                try await writer.write(buffer)
            }
            try await writer.finish(nil)
        })
    }

    enum ExportFormat: String {
        case ndjson, csv

        init(_ text: String?) throws {
            guard let format = ExportFormat(rawValue: text ?? "ndjson") else {
                throw BackplaneError.validation("'format' must be ndjson or csv.", field: "format")
            }
            self = format
        }

        var contentType: String {
            switch self {
            case .ndjson: "application/x-ndjson"
            case .csv: "text/csv; charset=utf-8"
            }
        }
    }

    static func filter(_ request: Request) throws -> EventFilter {
        let query = request.uri.queryParameters
        func text(_ name: String) -> String? { query[Substring(name)].map(String.init) }
        var type: EventType?
        if let text = query["type"].map(String.init) {
            guard let known = EventType(rawValue: text) else {
                throw BackplaneError.validation(
                    "Unknown event type '\(text)'; known types: \(EventType.allCases.map(\.rawValue).joined(separator: ", ")).", field: "type")
            }
            type = known
        }
        let from = try QueryValue.date(text("from"), name: "from"), to = try QueryValue.date(text("to"), name: "to")
        return EventFilter(type: type, userId: text("userId"), deviceId: text("deviceId"), assetId: text("assetId"), from: from, to: to)
    }
}

/// The export's CSV (RFC 4180): one header line, one line per event, fields quoted when needed.
enum EventCSV {
    static let columns = [
        "deviceId", "sequence", "eventId", "type", "deviceTime", "receivedAt", "correctedTime", "userId", "externalDeviceId",
        "appState", "platform", "sdkVersion", "appVersion", "assetId", "deletionReason", "resetType", "limitType", "bitrate",
        "durationSeconds", "errorCode", "errorMessage", "customName", "customString", "customNumber",
    ]
    static let header = columns.joined(separator: ",") + "\r\n"

    static func row(_ stored: StoredEvent) -> String {
        let event = stored.event, content = event.content
        func time(_ date: Date) -> String { date.formatted(timeFormat) }
        let fields: [String?] = [
            stored.deviceId, String(event.sequence), event.eventId, content.type.rawValue, time(event.deviceTime), time(stored.receivedAt),
            time(stored.correctedTime), event.userId, event.externalDeviceId, event.appState?.rawValue, event.platform, event.sdkVersion,
            event.appVersion, content.assetId, content.deletionReason?.rawValue, content.resetType?.rawValue, content.limitType?.rawValue,
            content.bitrate.map(String.init), content.durationSeconds.map { String($0) }, content.errorCode, content.errorMessage,
            content.customName, content.customString, content.customNumber.map { String($0) },
        ]
        return fields.map { quote($0 ?? "") }.joined(separator: ",") + "\r\n"
    }

    /// RFC 3339 in UTC with milliseconds and the `Z`: a spreadsheet or script reading the file
    /// must not guess the zone.
    static let timeFormat = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    static func quote(_ field: String) -> String {
        // Scalars, not Characters: "\r\n" is one Character and would match neither.
        guard field.unicodeScalars.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return field }
        return "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
