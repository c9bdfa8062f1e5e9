import Foundation

/// Why a file of a download could not be fetched. `isFatal` failures are not retried: fetching
/// again would give the same answer (a captive portal's HTML instead of video, a file that
/// changed size under a resumed download, a playlist the SDK cannot use, an answer whose
/// numbers cannot be true).
public struct DownloadFailure: Error, Sendable, Equatable, Codable, CustomStringConvertible {
    public enum Kind: String, Sendable, Codable {
        /// The connection failed, timed out or ended early.
        case network
        /// The origin answered with an error status (`status`).
        case http
        /// The answer's `Content-Type` is not one the asset allows.
        case mimeType
        /// The file's size on the origin changed under a resumed download.
        case sizeChanged
        /// The origin's answer breaks HTTP's rules for what was asked (a wrong `Content-Range`).
        case protocolViolation
        /// The origin's answer cannot be used, however often it is asked: a length beyond what
        /// the storage rules could ever hold, a number out of any sensible range.
        case origin
        /// An HLS playlist or a DASH manifest that cannot be downloaded (see the message).
        case playlist
        /// The device's storage refused the write (full, read-only, …).
        case storage
        /// A storage rule (`maxStorage`, `headroom`) leaves no room: the asset is blocked, not
        /// failed, and goes on when there is room.
        case noSpace
        /// The backplane denied the download permission (the message names the rule). Only the
        /// lifetime rule fails the asset; the others are asked again at the next pass.
        case permissionDenied
        /// The app's license provider could not acquire the asset's license (see the message):
        /// tried again on the next pass, like a network failure.
        case license
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
        case .http: status.map { $0 >= 500 || $0 == 408 || $0 == 429 } ?? true
        case .mimeType, .sizeChanged, .origin, .playlist, .storage, .permissionDenied, .license: false
        }
    }
}
