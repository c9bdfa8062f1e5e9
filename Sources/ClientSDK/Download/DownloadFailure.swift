import Foundation
import BackplaneWire

/// Why a file of a download could not be fetched. `isFatal` failures are not retried: fetching
/// again would give the same answer (a captive portal's HTML instead of video, a file that
/// changed size under a resumed download, a playlist the SDK cannot use, an answer whose
/// numbers cannot be true).
public struct DownloadFailure: Error, Sendable, Equatable, Codable, CustomStringConvertible {
    public struct Kind: WireVocabulary {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The connection failed, timed out or ended early.
        public static let network = Kind(rawValue: "network")
        /// The origin answered with an error status (`status`).
        public static let http = Kind(rawValue: "http")
        /// The answer's `Content-Type` is not one the asset allows.
        public static let mimeType = Kind(rawValue: "mimeType")
        /// The file's size on the origin changed under a resumed download.
        public static let sizeChanged = Kind(rawValue: "sizeChanged")
        /// The origin's answer breaks HTTP's rules for what was asked (a wrong `Content-Range`).
        public static let protocolViolation = Kind(rawValue: "protocolViolation")
        /// The origin's answer cannot be used, however often it is asked: a length beyond what
        /// the storage rules could ever hold, a number out of any sensible range.
        public static let origin = Kind(rawValue: "origin")
        /// An HLS playlist or a DASH manifest that cannot be downloaded (see the message).
        public static let playlist = Kind(rawValue: "playlist")
        /// The device's storage refused the write (full, read-only, …).
        public static let storage = Kind(rawValue: "storage")
        /// A storage rule (`maxStorage`, `headroom`) leaves no room: the asset is blocked, not
        /// failed, and goes on when there is room.
        public static let noSpace = Kind(rawValue: "noSpace")
        /// The backplane denied the download permission (the message names the rule). Only the
        /// lifetime rule fails the asset; the others are asked again at the next pass.
        public static let permissionDenied = Kind(rawValue: "permissionDenied")
        /// The app's license provider could not acquire the asset's license (see the message):
        /// tried again on the next pass, like a network failure.
        public static let license = Kind(rawValue: "license")
        public static let allCases: [Kind] = [
            .network, .http, .mimeType, .sizeChanged, .protocolViolation, .origin, .playlist, .storage, .noSpace,
            .permissionDenied, .license,
        ]
    }

    public var kind: Kind
    public var status: Int?
    public var message: String
    /// What the answer's `Retry-After` asked (`FetchRetry.retryAfter`): how long the next try
    /// waits. Not stored, and not part of what makes two failures the same.
    var retryAfter: Duration?

    public init(_ kind: Kind, status: Int? = nil, _ message: String) {
        self.kind = kind
        self.status = status
        self.message = message
    }

    init(_ kind: Kind, status: Int?, retryAfter: Duration?, _ message: String) {
        self.init(kind, status: status, message)
        self.retryAfter = retryAfter
    }

    private enum CodingKeys: String, CodingKey {
        case kind, status, message
    }

    public static func == (lhs: DownloadFailure, rhs: DownloadFailure) -> Bool {
        lhs.kind == rhs.kind && lhs.status == rhs.status && lhs.message == rhs.message
    }

    public var isFatal: Bool {
        [.mimeType, .sizeChanged, .playlist, .origin].contains(kind)
    }

    public var description: String { message }

    /// A failure that may not happen again soon: the network, an origin's 5xx, 408 or 429, a
    /// wrong range, no room yet. An asset whose playlists fail so is queued all the same.
    var isPassing: Bool {
        switch kind {
        case .network, .protocolViolation, .noSpace: true
        case .http: status.map(RetryableStatus.contains) ?? true
        default: false
        }
    }
}
