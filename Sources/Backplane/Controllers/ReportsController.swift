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
        let format = try ExportFormat(request.uri.queryParameters["format"].map(String.init))
        let filter = try Self.filter(request)
        try EventService.validate(filter)
        return Self.exportResponse(events: events, applicationId: context.applicationId, filter: filter, format: format)
    }

    /// The export's answer, for the API and the console: the filter is checked already.
    static func exportResponse(events: EventService, applicationId: String, filter: EventFilter, format: ExportFormat) -> Response {
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
        return try filter { query[Substring($0)].map(String.init) }
    }

    /// The event filter from the query's values by name (the API's and the console's).
    static func filter(_ text: (String) -> String?) throws -> EventFilter {
        let type = try QueryValue.option(text("type"), name: "type", as: EventType.self)
        let from = try QueryValue.date(text("from"), name: "from"), to = try QueryValue.date(text("to"), name: "to")
        return EventFilter(type: type, userId: text("userId"), deviceId: text("deviceId"), assetId: text("assetId"), from: from, to: to)
    }
}

/// The export's CSV (RFC 4180): one header line, one line per event, fields quoted when needed.
/// Text that came from a device is neutralised (`CSVCell.text`); numbers, times and event types
/// the backplane formatted itself are written as they are.
enum EventCSV {
    static let columns = [
        "deviceId", "sequence", "eventId", "type", "deviceTime", "receivedAt", "correctedTime", "userId", "externalDeviceId",
        "appState", "platform", "sdkVersion", "appVersion", "assetId", "deletionReason", "resetType", "limitType", "bitrate",
        "durationSeconds", "errorCode", "errorMessage", "customName", "customString", "customNumber",
    ]
    static let header = columns.joined(separator: ",") + "\r\n"

    static func row(_ stored: StoredEvent) -> String {
        let event = stored.event, content = event.content
        func time(_ date: Date) -> String { CSVCell.value(date.formatted(timeFormat)) }
        func text(_ value: String?) -> String { CSVCell.text(value ?? "") }
        func value(_ value: String?) -> String { CSVCell.value(value ?? "") }
        let fields: [String] = [
            text(stored.deviceId), value(String(event.sequence)), text(event.eventId), value(content.type.rawValue), time(event.deviceTime),
            time(stored.receivedAt), time(stored.correctedTime), text(event.userId), text(event.externalDeviceId), value(event.appState?.rawValue),
            text(event.platform), text(event.sdkVersion), text(event.appVersion), text(content.assetId), value(content.deletionReason?.rawValue),
            value(content.resetType?.rawValue), value(content.limitType?.rawValue), value(content.bitrate.map(String.init)),
            value(content.durationSeconds.map { String($0) }), text(content.errorCode), text(content.errorMessage), text(content.customName),
            text(content.customString), value(content.customNumber.map { String($0) }),
        ]
        return fields.joined(separator: ",") + "\r\n"
    }

    /// RFC 3339 in UTC with milliseconds and the `Z`: a spreadsheet or script reading the file
    /// must not guess the zone.
    static let timeFormat = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
}

/// One CSV cell (RFC 4180), for every CSV the backplane writes.
enum CSVCell {
    /// Text from outside (device ids, user ids, event strings, nicknames). A spreadsheet runs a
    /// cell that starts with `=`, `+`, `-` or `@` as a formula (and one starting with a tab or a
    /// carriage return may reach one), so such a cell gets a leading `'`, as OWASP's "CSV
    /// Injection" advice says: shown as text, the value is kept whole after the quote mark.
    static func text(_ field: String) -> String {
        guard let first = field.unicodeScalars.first, formulaStarts.contains(first) else { return value(field) }
        return value("'" + field)
    }

    /// A value the backplane formatted (a number, a time, a name from a fixed list): quoted when
    /// needed, never prefixed, so a negative number stays a number.
    static func value(_ field: String) -> String {
        // Scalars, not Characters: "\r\n" is one Character and would match neither.
        guard field.unicodeScalars.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return field }
        return "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    private static let formulaStarts: Set<Unicode.Scalar> = ["=", "+", "-", "@", "\t", "\r"]
}
