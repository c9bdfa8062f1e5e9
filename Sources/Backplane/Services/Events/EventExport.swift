import Foundation
import BackplaneWire

/// The formats of an event export: newline-delimited JSON (one `StoredEvent` a line) or CSV.
enum EventExportFormat: String {
    case ndjson, csv

    /// `text` as a query or a form names it; nil is the default, NDJSON.
    init(_ text: String?) throws {
        guard let format = EventExportFormat(rawValue: text ?? "ndjson") else {
            throw ServiceError.validation("'format' must be ndjson or csv.", field: "format")
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

extension EventService {
    /// Writes the events matching `filter` in `format`, a page of bytes at a time.
    func export(applicationId: String, filter: EventFilter, format: EventExportFormat, write: ([UInt8]) async throws -> Void) async throws {
        let encoder = WireJSON.encoder()
        if format == .csv { try await write(Array(EventCSV.header.utf8)) }
        try await export(applicationId: applicationId, filter: filter) { page in
            var bytes: [UInt8] = []
            for event in page {
                switch format {
                case .ndjson:
                    bytes += try encoder.encode(event)
                    bytes.append(UInt8(ascii: "\n"))
                case .csv:
                    bytes += EventCSV.row(event).utf8
                }
            }
            try await write(bytes)
        }
    }
}

extension EventFilter {
    /// The filter from values by name (a URL query's, a console form's): `type`, `userId`,
    /// `deviceId`, `assetId`, `from`, `to`.
    init(named text: (String) -> String?) throws {
        let type = try QueryValue.option(text("type"), name: "type", as: EventType.self)
        let from = try QueryValue.date(text("from"), name: "from"), to = try QueryValue.date(text("to"), name: "to")
        self.init(type: type, userId: text("userId"), deviceId: text("deviceId"), assetId: text("assetId"), from: from, to: to)
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
