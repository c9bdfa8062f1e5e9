import Foundation
import BackplaneWire

/// The one error type of the SDK: what went wrong, and the server's answer when there was one.
public struct BackplaneClientError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. A struct with static values rather than an enum, as
    /// async-http-client's `HTTPClientError` is, so that a kind added later does not break an
    /// app's `switch` (which needs a `default` anyway).
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        /// A stable name, for logs and the harness's output.
        public let rawValue: String
        private init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The backplane could not be reached or did not answer in time.
        public static let communicationsFailure = Kind("communicationsFailure")
        /// The backplane answered with an error; `code` and `status` say which.
        public static let server = Kind("server")
        /// The backplane answered something the SDK cannot read.
        public static let invalidResponse = Kind("invalidResponse")
        /// The SDK could not read or write its data directory.
        public static let localStorage = Kind("localStorage")
        /// The engine is not started, was shut down, or its device was unregistered.
        public static let notRunning = Kind("notRunning")
        /// The app passed something the backplane would refuse (an event missing a field, a
        /// text over its limit); `message` says what. Nothing was stored.
        public static let invalidInput = Kind("invalidInput")
        /// An asset could not be queued for download: its origin failed or its playlist cannot be
        /// downloaded (HTML, malformed, live); `downloadFailure` says why. Nothing was queued.
        public static let download = Kind("download")
        /// The app's `userToken` closure threw: no registration was attempted; `underlying` is its error.
        public static let userToken = Kind("userToken")
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
        // A network error's own text is the libraries' ("connection reset (error set): ...");
        // the message says what happened in a sentence, and `underlying` keeps the detail.
        if let underlying, kind != .communicationsFailure { text += " (\(underlying))" }
        return text
    }

    /// Worth retrying later: no answer, an unreadable answer, or a server-side failure (5xx).
    /// An answer with an error status is judged by the status's class, whatever its code (one
    /// a later backplane added included) and whoever answered (a proxy without an error body).
    public var isTransient: Bool {
        switch kind {
        case .communicationsFailure: true
        // An unreadable answer may read next time; a 4xx from a proxy says the same again.
        case .invalidResponse: status.map { !(400..<500).contains($0) || RetryableStatus.contains($0) } ?? true
        case .server: status.map(RetryableStatus.contains) ?? false
        case .download: downloadFailure.map { !$0.isFatal } ?? false
        default: false
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
