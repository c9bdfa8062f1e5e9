import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import BackplaneWire

/// The cookies, form tokens and response headers of the console.
enum ConsoleSecurity {
    /// The session cookie: the bearer token itself. `HttpOnly` keeps it from scripts,
    /// `SameSite=Strict` from every request another site starts, and `Path` from the API.
    static let sessionCookie = "backplane_console"
    /// Before sign-in: a random value the sign-in form repeats (double submit), so another site
    /// cannot sign a browser in with a token of its choosing.
    static let signInCookie = "backplane_console_signin"
    /// How long a session cookie lives; the token's own expiry ends it sooner.
    static let sessionLifetimeSeconds = 12 * 3600

    /// `default-src 'none'`: no script at all, styles and images only from the console's own
    /// files, forms only to the console, never framed.
    static let contentSecurityPolicy =
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

    /// The headers of every console answer.
    static func pageHeaders(contentType: String = "text/html; charset=utf-8") -> HTTPFields {
        var headers = HTTPFields()
        headers[.contentType] = contentType
        headers[.contentSecurityPolicy] = contentSecurityPolicy
        headers[.cacheControl] = "no-store"
        headers[.xContentTypeOptions] = "nosniff"
        // Not "no-referrer": under it a browser sends `Origin: null` with the console's own forms,
        // and the origin check below could not tell them from a sandboxed page's.
        headers[.referrerPolicy] = "same-origin"
        headers[.xFrameOptions] = "DENY"
        return headers
    }

    /// A session's form token: an HMAC of a fixed label under the bearer token. Another site
    /// can neither read it from a page nor compute it without the token, and it needs no storage.
    static func formToken(forBearer token: String) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Data("backplane console form".utf8), using: SymmetricKey(data: Data(token.utf8)))
        return Data(code).prefix(20).hexString
    }

    /// Constant-time comparison of two form tokens.
    static func matches(_ presented: String?, _ expected: String) -> Bool {
        guard let presented, presented.utf8.count == expected.utf8.count else { return false }
        return zip(presented.utf8, expected.utf8).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// Refuses a state-changing request that another site started: a wrong form token, or a
    /// browser saying the request is cross-site (`Sec-Fetch-Site`, `Origin`).
    static func checkForm(_ request: Request, formToken presented: String?, expected: String) throws {
        if let site = request.headers[.secFetchSite], site == "cross-site" {
            throw refused("The form was sent from another site.")
        }
        // Host names only: a proxy may pass `Host` without the port the browser used
        // (nginx's `$host`), and a port is no boundary between sites anyway. `Origin: null` is
        // what a sandboxed or opaque page sends; the console's own pages send their origin.
        if let origin = request.headers[.origin], let host = request.headers[.host] ?? request.head.authority,
           origin == "null" || URL(string: origin)?.host?.lowercased() != URL(string: "http://\(host)")?.host?.lowercased() {
            throw refused("The form was sent from another origin (\(origin)).")
        }
        guard matches(presented, expected) else {
            throw refused("The form's security token is missing or out of date. Reload the page and try again.")
        }
    }

    static func refused(_ message: String) -> ServiceError {
        ServiceError(.forbidden, message, details: ["reason": .string("csrf")])
    }

    /// A console cookie (Hummingbird's `Cookie`): `HttpOnly`, `SameSite=Strict`, path `/console`,
    /// and `Secure` when the browser reached the backplane over TLS (a proxy in front says so in
    /// `X-Forwarded-Proto`, the first proxy's word first in a list; the backplane itself speaks
    /// plain HTTP). A nil value clears the cookie. Values are ours (a bearer token, a random
    /// value), always valid cookie characters.
    static func cookie(_ name: String, _ value: String?, maxAge: Int, request: Request) -> Cookie {
        let scheme = request.headers[.xForwardedProto]?.split(separator: ",").first?.trimmingCharacters(in: .whitespaces).lowercased()
        return Cookie(
            name: name, value: value ?? "", maxAge: value == nil ? 0 : maxAge, path: "/console", secure: scheme == "https",
            httpOnly: true, sameSite: .strict)
    }
}

extension HTTPField.Name {
    static let contentSecurityPolicy = Self("Content-Security-Policy")!
    static let xContentTypeOptions = Self("X-Content-Type-Options")!
    static let referrerPolicy = Self("Referrer-Policy")!
    static let xFrameOptions = Self("X-Frame-Options")!
    static let secFetchSite = Self("Sec-Fetch-Site")!
    static let origin = Self("Origin")!
    static let host = Self("Host")!
    static let xForwardedProto = Self("X-Forwarded-Proto")!
}

/// The console's signed-in routes: the session cookie must hold a live token, or the browser is
/// sent to the sign-in page.
struct ConsoleSessionMiddleware: RouterMiddleware {
    typealias Context = BackplaneRequestContext

    let services: BackplaneServices

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let signIn = Response(status: .seeOther, headers: [.location: "/console/sign-in"])
        guard let token = request.cookies[ConsoleSecurity.sessionCookie]?.value, !token.isEmpty else { return signIn }
        let record: TokenRecord
        do {
            record = try await services.applications.authenticate(bearer: token, now: services.now())
        } catch let error as ServiceError where error.code == .invalidCredentials {
            // Revoked or expired since sign-in: sign in again. (A store that cannot answer is
            // an error page, not a sign-out.)
            return signIn
        }
        var context = context
        context.identity = .browser(BrowserSession(
            applicationId: record.applicationId, scope: record.scope, tokenName: record.name,
            formToken: ConsoleSecurity.formToken(forBearer: token)))
        return try await next(request, context)
    }
}

/// A signed-in console request.
struct ConsoleRequestContext: ChildRequestContext, WireCodingContext {
    var coreContext: CoreRequestContextStorage
    let session: BrowserSession

    init(context: BackplaneRequestContext) throws {
        guard case .browser(let session)? = context.identity else {
            throw ServiceError.invalidCredentials("Sign in to the console first.")
        }
        self.coreContext = context.coreContext
        self.session = session
    }

    var applicationId: String { session.applicationId }
}
