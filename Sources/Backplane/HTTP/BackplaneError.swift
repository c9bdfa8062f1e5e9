import Foundation
import Hummingbird
import BackplaneWire

/// An error as HTTP answers it: a status, the error body (`ErrorBody` in BackplaneWire) and any
/// headers it needs. Services throw `ServiceError`, which `ErrorMiddleware` turns into this by
/// one table (`ErrorCode.httpStatus`); this type is made directly only for refusals that exist
/// in HTTP alone (a wrong method, a rate limit's `Retry-After`, an unreadable request head).
public struct BackplaneError: Error, HTTPResponseError, Sendable, CustomStringConvertible {
    public var status: HTTPResponse.Status
    public var body: ErrorBody
    /// Sent with the error body (e.g. `Allow` with a 405).
    public var headers: HTTPFields = [:]

    public init(_ status: HTTPResponse.Status, _ code: ErrorCode, _ message: String, details: [String: JSONValue]? = nil) {
        self.status = status
        self.body = ErrorBody(code: code, message: message, details: details)
    }

    /// A service's refusal, with the status its code has. A 503 says when to come back
    /// (`Retry-After`), so clients and load balancers wait out an outage instead of hammering it.
    public init(_ error: ServiceError) {
        self.init(error.code.httpStatus, error.code, error.message, details: error.details)
        if status == .serviceUnavailable { headers[.retryAfter] = "\(Self.unavailableRetryAfterSeconds)" }
    }

    /// Seconds a 503 asks clients to wait: about what a PostgreSQL restart takes, and what the
    /// pool and the wake-up listener take to reconnect after one.
    public static let unavailableRetryAfterSeconds = 2

    public var code: ErrorCode { body.error.code }
    public var description: String { "\(status.code) \(body.error.code.rawValue): \(body.error.message)" }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = headers
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: encodedBody))
    }

    /// The error body as JSON: what every error answer carries, whoever writes it.
    var encodedBody: ByteBuffer {
        // An ErrorBody of strings and JSON values always encodes.
        ByteBuffer(bytes: (try? WireJSON.encoder().encode(body)) ?? Data())
    }

    // MARK: refusals that exist in HTTP alone

    public static func methodNotAllowed(_ method: String, allowed: [String]) -> Self {
        var error = Self(.methodNotAllowed, .methodNotAllowed, "\(method) is not served here; this path serves \(allowed.joined(separator: ", ")).",
                         details: ["allowed": .array(allowed.map { .string($0) })])
        error.headers[.allow] = allowed.joined(separator: ", ")
        return error
    }
    /// 429 with `Retry-After`, whole seconds rounded up.
    public static func rateLimited(_ scope: String, retryAfter: Duration) -> Self {
        let seconds = max(1, Int((Double(retryAfter.nanoseconds) / 1e9).rounded(.up)))
        var error = Self(.tooManyRequests, .rateLimited, "Too many requests from this \(scope); retry in \(seconds) s.",
                         details: ["scope": .string(scope), "retryAfterSeconds": .int(Int64(seconds))])
        error.headers[.retryAfter] = "\(seconds)"
        return error
    }

    public static func internalError(requestId: String) -> Self {
        .init(.internalServerError, .internalError, "Internal error; quote request id \(requestId) when reporting it.",
              details: ["requestId": .string(requestId)])
    }
}
