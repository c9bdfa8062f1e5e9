import Foundation

/// Stable error codes. Every non-2xx answer of the backplane carries exactly one of these;
/// clients switch on the code, never on the message.
public struct ErrorCode: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Malformed JSON, wrong types, missing required fields, bad query parameters.
    public static let badRequest = ErrorCode(rawValue: "bad_request")
    /// Well-formed input whose values break a documented rule (range, length, format).
    public static let validationFailed = ErrorCode(rawValue: "validation_failed")
    /// The request body is larger than the documented limit.
    public static let payloadTooLarge = ErrorCode(rawValue: "payload_too_large")
    /// The request head (request line and header fields) is larger than the documented limit (431).
    public static let headersTooLarge = ErrorCode(rawValue: "headers_too_large")
    /// Unknown app key, unknown or revoked bearer token, wrong device credential.
    public static let invalidCredentials = ErrorCode(rawValue: "invalid_credentials")
    /// The request signature does not match, or signing headers are missing.
    public static let invalidSignature = ErrorCode(rawValue: "invalid_signature")
    /// The signed timestamp is outside the accepted window.
    public static let staleTimestamp = ErrorCode(rawValue: "stale_timestamp")
    /// The nonce was already used with this app key inside the replay window.
    public static let nonceReused = ErrorCode(rawValue: "nonce_reused")
    /// The application requires a user token (`X-Backplane-User-Token`) and none was sent.
    public static let userTokenRequired = ErrorCode(rawValue: "user_token_required")
    /// The user token was refused: bad signature, unknown key, expired, wrong issuer or
    /// audience, or a refused algorithm. The message says which.
    public static let userTokenInvalid = ErrorCode(rawValue: "user_token_invalid")
    /// A valid user token names another user than the request's `userId`.
    public static let userTokenMismatch = ErrorCode(rawValue: "user_token_mismatch")
    /// Authenticated, but not allowed (wrong scope, a device acting as another).
    public static let forbidden = ErrorCode(rawValue: "forbidden")
    /// The device was unregistered; it must register again before anything else.
    public static let deviceUnregistered = ErrorCode(rawValue: "device_unregistered")
    /// The resource does not exist (or belongs to another application).
    public static let notFound = ErrorCode(rawValue: "not_found")
    /// The device id is registered already (to another user, or by an install that could not
    /// prove it is that device).
    public static let deviceAlreadyRegistered = ErrorCode(rawValue: "device_already_registered")
    /// Enabling download would exceed the per-user device limit.
    public static let deviceLimitReached = ErrorCode(rawValue: "device_limit_reached")
    /// A download permission is denied by a limit: `details.rule` names it (`DownloadRule`),
    /// `details.counts` carries every count and limit.
    public static let downloadLimitReached = ErrorCode(rawValue: "download_limit_reached")
    /// A download permission is denied because the device is not download-enabled.
    public static let downloadNotEnabled = ErrorCode(rawValue: "download_not_enabled")
    /// A license is refused: `details.reason` says why (`LicenseDenial`).
    public static let licenseDenied = ErrorCode(rawValue: "license_denied")
    /// The application's license server did not answer in time, or answered with a server
    /// error, a redirect or too much (502): the device may try again later. `details.licenseServerStatus`
    /// carries the status it answered, if any.
    public static let licenseServerFailed = ErrorCode(rawValue: "license_server_failed")
    /// The request conflicts with the current state (e.g. revoking the last key).
    public static let conflict = ErrorCode(rawValue: "conflict")
    /// The route exists but not with this HTTP method.
    public static let methodNotAllowed = ErrorCode(rawValue: "method_not_allowed")
    /// Too many requests from this device or this address; retry after `Retry-After` seconds.
    public static let rateLimited = ErrorCode(rawValue: "rate_limited")
    /// The server cannot answer now (e.g. its database is unreachable); retry later.
    public static let serviceUnavailable = ErrorCode(rawValue: "service_unavailable")
    /// A server bug. The message carries the request id to quote in a report.
    public static let internalError = ErrorCode(rawValue: "internal_error")
    public static let allCases: [ErrorCode] = [
        .badRequest, .validationFailed, .payloadTooLarge, .headersTooLarge, .invalidCredentials, .invalidSignature,
        .staleTimestamp, .nonceReused, .userTokenRequired, .userTokenInvalid, .userTokenMismatch, .forbidden,
        .deviceUnregistered, .notFound, .deviceAlreadyRegistered, .deviceLimitReached, .downloadLimitReached,
        .downloadNotEnabled, .licenseDenied, .licenseServerFailed, .conflict, .methodNotAllowed, .rateLimited, .serviceUnavailable, .internalError,
    ]
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
