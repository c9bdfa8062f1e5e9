import Foundation
import Hummingbird
import Mustache
import BackplaneWire

/// Renders console pages: a page's template with its model, inside the layout. Every `{{value}}`
/// is HTML-escaped (`ScalarHTMLEscaping`, quotes included, so values are safe in attributes
/// too); the templates use the unescaped form only for `{{{body}}}`, the page already rendered.
struct ConsoleRenderer: Sendable {
    private let library: MustacheLibrary

    init() {
        MustacheContentTypes.register(ScalarHTMLEscaping(), named: ScalarHTMLEscaping.name)
        let escaping = "{{% CONTENT_TYPE: \(ScalarHTMLEscaping.name)}}"
        var library = MustacheLibrary()
        // The templates are constants of this module: one that does not parse is a bug the
        // console tests catch at once.
        for (name, text) in ConsoleTemplates.pages {
            // The page model sits under `page`, the layout's values (the form token) above it.
            // swiftlint:disable:next force_try
            try! library.register(escaping + "{{#page}}" + text + "{{/page}}", named: name)
        }
        for (name, text) in ConsoleTemplates.partials {
            // swiftlint:disable:next force_try
            try! library.register(escaping + text, named: name)
        }
        // swiftlint:disable:next force_try
        try! library.register(escaping + ConsoleTemplates.layout, named: "layout")
        self.library = library
    }

    /// A whole page. `session` nil: the signed-out pages (sign-in, its errors).
    func page<Model>(
        _ template: String, title: String, model: Model, session: BrowserSession?, current: ConsoleNavigation.Item? = nil,
        notice: String? = nil, status: HTTPResponse.Status = .ok
    ) -> Response {
        let body = library.render(PageFrame(csrf: session?.formToken ?? "", page: model), withTemplate: template) ?? ""
        let layout = Layout(
            title: title, body: body, notice: notice, signedIn: session != nil, csrf: session?.formToken ?? "",
            tokenName: session?.tokenName ?? "", scope: session?.scope.rawValue ?? "",
            nav: session.map { ConsoleNavigation.links(for: $0.scope, current: current) } ?? [])
        return Response(status: status, headers: ConsoleSecurity.pageHeaders(), body: .init(byteBuffer: ByteBuffer(string: library.render(layout, withTemplate: "layout") ?? "")))
    }

    /// An error as a page: what went wrong, in words, with the status it has in the API.
    func error(_ error: BackplaneError, session: BrowserSession?) -> Response {
        page(
            "error", title: Self.errorTitle(error.status), model: ErrorModel(message: error.body.error.message, code: error.code.rawValue),
            session: session, status: error.status)
    }

    static func errorTitle(_ status: HTTPResponse.Status) -> String {
        switch status.code {
        case 400: "That did not work"
        case 401, 403: "Not allowed"
        case 404: "Not found"
        case 409: "Already changed"
        case 429: "Too many requests"
        default: status.reasonPhrase.isEmpty ? "Error" : status.reasonPhrase
        }
    }

    private struct PageFrame<Model> {
        let csrf: String
        let page: Model
    }

    private struct Layout {
        let title: String
        let body: String
        let notice: String?
        let signedIn: Bool
        let csrf: String
        let tokenName: String
        let scope: String
        let nav: [ConsoleNavigation.Link]
    }

    struct ErrorModel {
        let message: String
        let code: String
    }
}

/// HTML escaping by Unicode scalar. Mustache's own escaping looks characters up whole, and a
/// quote followed by a combining mark (`"` U+0301) is one character that is not a quote: it
/// would pass unescaped and end an attribute value. Every `&`, `<`, `>`, `"` and `'` scalar is
/// escaped here, whatever follows it.
struct ScalarHTMLEscaping: MustacheContentType {
    static let name = "BACKPLANE_HTML"

    func escapeText(_ text: String) -> String {
        var escaped = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped.append(contentsOf: "&amp;".unicodeScalars)
            case "<": escaped.append(contentsOf: "&lt;".unicodeScalars)
            case ">": escaped.append(contentsOf: "&gt;".unicodeScalars)
            case "\"": escaped.append(contentsOf: "&quot;".unicodeScalars)
            case "'": escaped.append(contentsOf: "&#39;".unicodeScalars)
            default: escaped.append(scalar)
            }
        }
        return String(escaped)
    }
}

/// The pages in the menu, each with the scope that may open it.
enum ConsoleNavigation {
    enum Item: String, CaseIterable {
        case overview, find, commands, feeds, events, settings, tokens

        var label: String {
            switch self {
            case .overview: "Overview"
            case .find: "Find"
            case .commands: "Commands"
            case .feeds: "Feeds"
            case .events: "Events"
            case .settings: "Settings"
            case .tokens: "Tokens and keys"
            }
        }

        var href: String { self == .overview ? "/console" : "/console/\(rawValue)" }

        /// Admin tokens see everything; a CMS token its feeds; a reporting token the event log.
        func isOpen(to scope: TokenScope) -> Bool {
            switch scope {
            case .admin: true
            case .cms: self == .feeds
            case .reporting: self == .events
            default: false
            }
        }
    }

    struct Link {
        let href: String
        let label: String
        let current: Bool
    }

    static func links(for scope: TokenScope, current: Item?) -> [Link] {
        Item.allCases.filter { $0.isOpen(to: scope) }.map { Link(href: $0.href, label: $0.label, current: $0 == current) }
    }

    /// Where a session starts: the first page its scope may open.
    static func home(for scope: TokenScope) -> String {
        Item.allCases.first { $0.isOpen(to: scope) }?.href ?? "/console"
    }
}

/// Formatting shared by the pages.
enum ConsoleFormat {
    /// UTC, to the second: support staff compare times with logs, which are in UTC.
    static func time(_ date: Date?) -> String {
        guard let date else { return "" }
        return date.formatted(Date.ISO8601FormatStyle()).replacingOccurrences(of: "T", with: " ").replacingOccurrences(of: "Z", with: " UTC")
    }

    /// Percent-encodes everything but RFC 3986's unreserved characters: a value placed in a path
    /// segment or a query cannot end it or start another.
    static func encoded(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    /// `path?name=value&…`, leaving out nil and empty values.
    static func link(_ path: String, _ query: [(String, String?)]) -> String {
        let pairs = query.compactMap { name, value in value.flatMap { $0.isEmpty ? nil : "\(name)=\(encoded($0))" } }
        return pairs.isEmpty ? path : path + "?" + pairs.joined(separator: "&")
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}
