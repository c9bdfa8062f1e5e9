import Foundation
import BackplaneWire

/// The one error type of the SDK: what went wrong, and the server's answer when there was one.
public struct BackplaneClientError: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// The backplane could not be reached or did not answer in time.
        case communicationsFailure
        /// The backplane answered with an error; `code` and `status` say which.
        case server
        /// The backplane answered something the SDK cannot read.
        case invalidResponse
        /// The SDK could not read or write its data directory.
        case localStorage
        /// The engine is not started, was shut down, or its device was unregistered.
        case notRunning
        /// The app passed something the backplane would refuse (an event missing a field, a
        /// text over its limit); `message` says what. Nothing was stored.
        case invalidInput
        /// An asset could not be queued for download: its origin failed or its playlist cannot be
        /// downloaded (HTML, malformed, live); `downloadFailure` says why. Nothing was queued.
        case download
    }

    public var kind: Kind
    /// The server's stable error code, for `.server`.
    public var code: ErrorCode?
    /// The HTTP status, for `.server` and `.invalidResponse`.
    public var status: Int?
    public var message: String
    /// The server's error details (e.g. `deviceLimit` and `downloadEnabledCount`).
    public var details: [String: JSONValue]?
    public var underlying: (any Error)?

    public init(
        kind: Kind, code: ErrorCode? = nil, status: Int? = nil, message: String,
        details: [String: JSONValue]? = nil, underlying: (any Error)? = nil
    ) {
        self.kind = kind
        self.code = code
        self.status = status
        self.message = message
        self.details = details
        self.underlying = underlying
    }

    public var description: String {
        var text = "\(kind.rawValue)"
        if let status { text += " \(status)" }
        if let code { text += " \(code.rawValue)" }
        text += ": \(message)"
        if let underlying { text += " (\(underlying))" }
        return text
    }

    /// Worth retrying later: no answer, an unreadable answer, or a server-side failure (5xx).
    public var isTransient: Bool {
        switch kind {
        case .communicationsFailure, .invalidResponse: true
        // 429: the backplane limits this device's or this address's requests for a while.
        case .server: (status ?? 0) >= 500 || status == 429
        case .localStorage, .notRunning, .invalidInput: false
        case .download: downloadFailure.map { !$0.isFatal } ?? false
        }
    }

    /// Why a download could not be queued, for `.download`.
    public var downloadFailure: DownloadFailure? {
        underlying as? DownloadFailure
    }

    /// The app key is wrong or revoked: nothing will work until the app ships a valid one.
    public var isInvalidCredentials: Bool {
        kind == .server && [.invalidCredentials, .invalidSignature].contains(code)
    }
}
