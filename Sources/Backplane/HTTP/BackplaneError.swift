import Foundation
import Hummingbird
import BackplaneWire

/// Every error the backplane answers on purpose. It renders the error body (`ErrorBody` in BackplaneWire);
/// anything else that escapes a handler is a bug and becomes `internal_error` (500).
public struct BackplaneError: Error, HTTPResponseError, Sendable, CustomStringConvertible {
    public var status: HTTPResponse.Status
    public var body: ErrorBody
    /// Sent with the error body (e.g. `Allow` with a 405).
    public var headers: HTTPFields = [:]

    public init(_ status: HTTPResponse.Status, _ code: ErrorCode, _ message: String, details: [String: JSONValue]? = nil) {
        self.status = status
        self.body = ErrorBody(code: code, message: message, details: details)
    }

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

    // MARK: the errors the services and middleware raise

    public static func badRequest(_ message: String) -> Self { .init(.badRequest, .badRequest, message) }
    public static func validation(_ message: String, field: String? = nil) -> Self {
        .init(.badRequest, .validationFailed, message, details: field.map { ["field": .string($0)] })
    }
    public static func payloadTooLarge(limit: Int) -> Self {
        .init(.contentTooLarge, .payloadTooLarge, "The request body is larger than \(limit) bytes.", details: ["limitBytes": .int(Int64(limit))])
    }
    public static func invalidCredentials(_ message: String) -> Self { .init(.unauthorized, .invalidCredentials, message) }
    public static func invalidSignature(_ message: String) -> Self { .init(.unauthorized, .invalidSignature, message) }
    /// A signed request whose nonce was used before (by the signing middleware, or by a service
    /// that records the nonce in its own transaction).
    public static var nonceReused: Self { .init(.unauthorized, .nonceReused, "This nonce was already used; every request needs a new one.") }
    public static func forbidden(_ message: String) -> Self { .init(.forbidden, .forbidden, message) }
    public static func notFound(_ message: String) -> Self { .init(.notFound, .notFound, message) }
    public static func conflict(_ message: String) -> Self { .init(.conflict, .conflict, message) }
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

    public static func deviceLimitReached(enabled: Int, limit: Int) -> Self {
        .init(.conflict, .deviceLimitReached,
              "The user already has \(enabled) download-enabled devices; the limit is \(limit).",
              details: ["downloadEnabledCount": .int(Int64(enabled)), "deviceLimit": .int(Int64(limit))])
    }
}

