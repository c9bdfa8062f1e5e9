import Foundation
import BackplaneWire

/// What a service (or any layer below HTTP) throws when it refuses a request on purpose: a
/// stable `ErrorCode`, a message for people, and details for programs. It knows nothing of HTTP:
/// `HTTP/ErrorMiddleware.swift` holds the one table from code to status, and renders the error
/// body (`ErrorBody` in BackplaneWire). Anything else that escapes is a bug (500).
public struct ServiceError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String
    public var details: [String: JSONValue]?

    public init(_ code: ErrorCode, _ message: String, details: [String: JSONValue]? = nil) {
        self.code = code
        self.message = message
        self.details = details
    }

    public var description: String { "\(code.rawValue): \(message)" }

    public static func badRequest(_ message: String) -> Self { .init(.badRequest, message) }
    public static func validation(_ message: String, field: String? = nil) -> Self {
        .init(.validationFailed, message, details: field.map { ["field": .string($0)] })
    }
    public static func payloadTooLarge(limit: Int) -> Self {
        .init(.payloadTooLarge, "The request body is larger than \(limit) bytes.", details: ["limitBytes": .int(Int64(limit))])
    }
    public static func invalidCredentials(_ message: String) -> Self { .init(.invalidCredentials, message) }
    public static func invalidSignature(_ message: String) -> Self { .init(.invalidSignature, message) }
    /// A signed request whose nonce was used before.
    public static var nonceReused: Self { .init(.nonceReused, "This nonce was already used; every request needs a new one.") }
    public static func forbidden(_ message: String) -> Self { .init(.forbidden, message) }
    public static func notFound(_ message: String) -> Self { .init(.notFound, message) }
    public static func conflict(_ message: String) -> Self { .init(.conflict, message) }
    public static func deviceLimitReached(enabled: Int, limit: Int) -> Self {
        .init(.deviceLimitReached, "The user already has \(enabled) download-enabled devices; the limit is \(limit).",
              details: ["downloadEnabledCount": .int(Int64(enabled)), "deviceLimit": .int(Int64(limit))])
    }
    public static var storeUnavailable: Self { .init(.serviceUnavailable, "The database is unavailable; try again shortly.") }
}
