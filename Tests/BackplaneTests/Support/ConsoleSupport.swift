import Backplane
import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing

/// A browser's part in the console tests: signs in through the form, keeps the session cookie,
/// and sends forms with the page's form token, as a browser would.
struct ConsoleBrowser {
    let client: Client
    private(set) var session: String?
    /// The form token of the last page read.
    private(set) var formToken: String?

    init(_ client: Client) {
        self.client = client
    }

    /// Signs in through the form; nil when the console refused the token.
    static func signIn(_ client: Client, token: String) async throws -> ConsoleBrowser? {
        var browser = ConsoleBrowser(client)
        let form = try await client.raw(.get, "/console/sign-in")
        #expect(form.status == .ok)
        let signInValue = try #require(Self.cookie("backplane_console_signin", in: form))
        let answer = try await browser.post("/console/sign-in", ["signin": signInValue, "token": token], cookie: "backplane_console_signin=\(signInValue)")
        guard answer.status == .seeOther, let session = Self.cookie("backplane_console", in: answer) else { return nil }
        browser.session = session
        _ = try await browser.get("/console/find")
        return browser
    }

    /// GET with the session cookie; remembers the page's form token.
    mutating func get(_ path: String, headers extra: HTTPFields = [:]) async throws -> TestResponse {
        var headers = extra
        if let session { headers[.cookie] = "backplane_console=\(session)" }
        let response = try await client.raw(.get, path, headers: headers)
        if let token = Self.formToken(in: response.text) { formToken = token }
        return response
    }

    /// POSTs a form with the session cookie; `csrf` is added from the last page unless given.
    func post(_ path: String, _ fields: [String: String], cookie: String? = nil, headers extra: HTTPFields = [:]) async throws -> TestResponse {
        var fields = fields
        if fields["csrf"] == nil, let formToken { fields["csrf"] = formToken }
        var headers = extra
        headers[.contentType] = "application/x-www-form-urlencoded"
        if let cookie = cookie ?? session.map({ "backplane_console=\($0)" }) { headers[.cookie] = cookie }
        let body = fields.sorted { $0.key < $1.key }.map { "\(Self.encoded($0.key))=\(Self.encoded($0.value))" }.joined(separator: "&")
        return try await client.raw(.post, path, headers: headers, body: Data(body.utf8))
    }

    static func cookie(_ name: String, in response: TestResponse) -> String? {
        for header in response.headers[values: .setCookie] {
            guard let pair = header.split(separator: ";").first, pair.hasPrefix("\(name)=") else { continue }
            return String(pair.dropFirst(name.count + 1))
        }
        return nil
    }

    static func setCookie(_ name: String, in response: TestResponse) -> String? {
        response.headers[values: .setCookie].first { $0.hasPrefix("\(name)=") }
    }

    static func formToken(in page: String) -> String? {
        guard let range = page.range(of: #"name="csrf" value=""#) else { return nil }
        return String(page[range.upperBound...].prefix { $0 != "\"" })
    }

    static func encoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")) ?? ""
    }
}
