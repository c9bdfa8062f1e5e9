import Foundation
import Hummingbird
import BackplaneWire

/// Reading the console's forms: `application/x-www-form-urlencoded`, bounded, decoded by
/// Hummingbird's form decoder into the handler's own type.
enum ConsoleForms {
    /// No console form comes near this: a settings form is well under 1 KiB.
    static let maxBytes = 16 * 1024

    static func decode<Form: Decodable>(_ type: Form.Type, from request: Request) async throws -> Form {
        var request = request
        guard request.headers[.contentType]?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true else {
            throw BackplaneError(.unsupportedMediaType, .badRequest, "Console forms are sent as application/x-www-form-urlencoded.")
        }
        let body = try await request.collectBody(upTo: maxBytes)
        do {
            return try URLEncodedFormDecoder().decode(Form.self, from: String(buffer: body))
        } catch {
            throw ServiceError.badRequest("The form is incomplete or malformed. Reload the page and try again.")
        }
    }

    /// The query of a console page, read as the form that sent it: a browser writes a GET form's
    /// spaces as `+`, which `URI.queryParameters` keeps as `+`. Fields sent empty are left out
    /// (a form sends every field; empty means "no filter"). A repeated name is a 400.
    static func query(_ request: Request) throws -> [String: String] {
        guard let raw = request.uri.query, !raw.isEmpty else { return [:] }
        do {
            return try URLEncodedFormDecoder().decode([String: String].self, from: raw).filter { !$0.value.isEmpty }
        } catch {
            throw ServiceError.badRequest("The query is malformed: each parameter may appear once.")
        }
    }

    /// `confirm=yes`: the second step of an action that asks first.
    static func confirmed(_ value: String?) -> Bool { value == "yes" }
}

/// A form that changes something: it carries the session's form token, as the page wrote it.
protocol ConsoleForm: Decodable {
    var csrf: String? { get }
}

extension ConsoleRequestContext {
    /// Reads a state-changing form: decoded, its form token and origin checked first (a forged
    /// form learns nothing more), then the scope the action needs (nil: any signed-in session).
    func form<Form: ConsoleForm>(_ type: Form.Type, from request: Request, needs scope: TokenScope?, toDo action: String) async throws -> Form {
        let form = try await ConsoleForms.decode(type, from: request)
        try ConsoleSecurity.checkForm(request, formToken: form.csrf, expected: session.formToken)
        if let scope { try session.require(scope, toDo: action) }
        return form
    }
}

/// The model of the page that asks before an action: the same form, sent again with `confirm=yes`.
struct ConsoleConfirmation {
    struct Field {
        let name: String
        let value: String
    }

    let question: String
    let action: String
    let button: String
    let fields: [Field]
    let cancelHref: String
}

/// A device as a row of the console's tables.
struct DeviceRow {
    let deviceId: String
    let href: String
    let nickname: String
    let userId: String
    let userHref: String
    let platform: String
    let model: String
    let downloadEnabled: Bool
    let lastSeen: String
    let state: String
    /// The download switch, on the user page.
    let toggleAction: String?
    let toggleValue: String
    let toggleLabel: String

    init(_ device: DeviceRecord) {
        deviceId = device.deviceId
        href = ConsolePaths.device(device.deviceId)
        nickname = device.nickname ?? ""
        userId = device.userId
        userHref = ConsolePaths.user(device.userId)
        platform = device.platform
        model = device.model ?? ""
        downloadEnabled = device.downloadEnabled
        lastSeen = ConsoleFormat.time(device.lastSeenAt)
        state = device.isRegistered ? "registered" : "unregistered"
        toggleAction = device.isRegistered ? href + "/download-enabled" : nil
        toggleValue = device.downloadEnabled ? "false" : "true"
        toggleLabel = device.downloadEnabled ? "Turn download off" : "Turn download on"
    }
}

/// A command as a row of the console's tables.
struct CommandRow {
    let commandId: String
    let type: String
    let assets: String?
    let deviceId: String
    let deviceHref: String
    let state: String
    let created: String
    let delivered: String
    let completed: String
    let reason: String
    /// Only a pending command can be cancelled.
    let cancelAction: String?

    init(_ command: Command) {
        commandId = command.commandId
        type = command.type.rawValue
        assets = command.assetIds.map { $0.joined(separator: ", ") }
        deviceId = command.deviceId
        deviceHref = ConsolePaths.device(command.deviceId)
        state = command.state.rawValue
        created = ConsoleFormat.time(command.createdAt)
        delivered = ConsoleFormat.time(command.deliveredAt)
        completed = ConsoleFormat.time(command.completedAt)
        reason = command.failureReason ?? ""
        cancelAction = command.state == .pending ? "/console/commands/\(ConsoleFormat.encoded(command.commandId))/cancel" : nil
    }
}

/// An option of a filter's `<select>`.
struct FilterOption {
    let value: String
    let selected: Bool

    static func all<Value: WireVocabulary>(_ type: Value.Type, selected: Value?) -> [FilterOption] {
        Value.allCases.map { FilterOption(value: $0.rawValue, selected: $0.rawValue == selected?.rawValue) }
    }
}

/// Events per UTC day as SVG bars, every day of the period shown (a day without events is a gap).
struct DailyChart {
    struct Bar {
        let day: String
        let count: Int
        let x: Int
        let y: Int
        let barWidth: Int
        let barHeight: Int
    }

    let bars: [Bar]
    let width: Int
    let height = 100
    let firstDay: String
    let lastDay: String
    let summary: String

    /// Nil when no day of the period has an event.
    init?(counts: [EventCounts.Row], from: Date, days: Int) {
        var perDay: [String: Int] = [:]
        for row in counts { perDay[row.day, default: 0] += row.count }
        let dayNames = (0..<days).map { offset in
            String(from.addingTimeInterval(Double(offset) * 86400).formatted(Date.ISO8601FormatStyle().year().month().day()).prefix(10))
        }
        let values = dayNames.map { perDay[$0] ?? 0 }
        guard let highest = values.max(), highest > 0 else { return nil }
        let slot = 20
        width = slot * days
        firstDay = dayNames.first ?? ""
        lastDay = dayNames.last ?? ""
        bars = zip(dayNames, values).enumerated().map { index, pair in
            let barHeight = max(pair.1 > 0 ? 2 : 0, pair.1 * 96 / highest)
            return Bar(day: pair.0, count: pair.1, x: index * slot + 3, y: 100 - barHeight, barWidth: slot - 6, barHeight: barHeight)
        }
        summary = "\(values.reduce(0, +)) events from \(dayNames.first ?? "") to \(dayNames.last ?? ""); busiest day \(highest)."
    }
}
