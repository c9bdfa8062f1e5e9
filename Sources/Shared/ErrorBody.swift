import Foundation

/// Stable error codes. Every non-2xx answer of the backplane carries exactly one of these;
/// clients switch on the code, never on the message.
public enum ErrorCode: String, Codable, Sendable, CaseIterable {
    /// Malformed JSON, wrong types, missing required fields, bad query parameters.
    case badRequest = "bad_request"
    /// Well-formed input whose values break a documented rule (range, length, format).
    case validationFailed = "validation_failed"
    /// The request body is larger than the documented limit.
    case payloadTooLarge = "payload_too_large"
    /// The request head (request line and header fields) is larger than the documented limit (431).
    case headersTooLarge = "headers_too_large"
    /// Unknown app key, unknown or revoked bearer token, wrong device credential.
    case invalidCredentials = "invalid_credentials"
    /// The request signature does not match, or signing headers are missing.
    case invalidSignature = "invalid_signature"
    /// The signed timestamp is outside the accepted window.
    case staleTimestamp = "stale_timestamp"
    /// The nonce was already used with this app key inside the replay window.
    case nonceReused = "nonce_reused"
    /// The application requires a user token (`X-Backplane-User-Token`) and none was sent.
    case userTokenRequired = "user_token_required"
    /// The user token was refused: bad signature, unknown key, expired, wrong issuer or
    /// audience, or a refused algorithm. The message says which.
    case userTokenInvalid = "user_token_invalid"
    /// A valid user token names another user than the request's `userId`.
    case userTokenMismatch = "user_token_mismatch"
    /// Authenticated, but not allowed (wrong scope, a device acting as another).
    case forbidden = "forbidden"
    /// The device was unregistered; it must register again before anything else.
    case deviceUnregistered = "device_unregistered"
    /// The resource does not exist (or belongs to another application).
    case notFound = "not_found"
    /// The device id is registered already (to another user, or by an install that could not
    /// prove it is that device).
    case deviceAlreadyRegistered = "device_already_registered"
    /// Enabling download would exceed the per-user device limit.
    case deviceLimitReached = "device_limit_reached"
    /// A download permission is denied by a limit: `details.rule` names it (`DownloadRule`),
    /// `details.counts` carries every count and limit.
    case downloadLimitReached = "download_limit_reached"
    /// A download permission is denied because the device is not download-enabled.
    case downloadNotEnabled = "download_not_enabled"
    /// The request conflicts with the current state (e.g. revoking the last key).
    case conflict = "conflict"
    /// The route exists but not with this HTTP method.
    case methodNotAllowed = "method_not_allowed"
    /// Too many requests from this device or this address; retry after `Retry-After` seconds.
    case rateLimited = "rate_limited"
    /// The server cannot answer now (e.g. its database is unreachable); retry later.
    case serviceUnavailable = "service_unavailable"
    /// A server bug. The message carries the request id to quote in a report.
    case internalError = "internal_error"
}

/// The JSON error body: `{"error": {"code": "...", "message": "...", "details": {...}}}`.
public struct ErrorBody: Codable, Sendable, Equatable {
    public struct Detail: Codable, Sendable, Equatable {
        public var code: ErrorCode
        public var message: String
        public var details: [String: JSONValue]?

        public init(code: ErrorCode, message: String, details: [String: JSONValue]? = nil) {
            self.code = code
            self.message = message
            self.details = details
        }
    }

    public var error: Detail

    public init(code: ErrorCode, message: String, details: [String: JSONValue]? = nil) {
        self.error = Detail(code: code, message: message, details: details)
    }
}

/// A small JSON value, for error details and free-form metadata.
public enum JSONValue: Codable, Sendable, Equatable, Hashable {
    case string(String)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    case array([JSONValue])
    case object([String: JSONValue])
    case null

    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        case .null: try container.encodeNil()
        }
    }

    public var intValue: Int64? {
        if case .int(let value) = self { return value }
        return nil
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }
}
