import Foundation

/// Common Media Client Data (CTA-5004) on a download's file requests, which CDNs log to tell
/// what their traffic is (Media3, hls.js, dash.js and AVPlayer send it). Off by default; an app
/// turns it on with `DownloadOptions.cmcd`. A download sends what a download knows:
///
/// - `ot`, the object type: `v` video, `a` audio, `av` muxed, `c` subtitles, `i` init section,
///   `k` key, `o` other (a flat file counts as muxed, an ancillary file as other);
/// - `br`, the encoded bit rate of the stream in kbit/s, when the playlist or MPD says it;
/// - `sf`, the stream format (`h` HLS, `d` DASH, `o` a flat file), and `st=v` (video on demand);
/// - `sid`, a session id, new for each run of an asset's download (a UUID);
/// - `cid`, the content id: the asset id, when it is at most 64 printable ASCII characters
///   (CTA-5004's bound), else left out.
///
/// It has no buffer, so `bl` is absent, as are the other player-only keys (`su`, `bs`, `pr`).
public struct CMCDOptions: Sendable, Equatable {
    /// How the data travels: in the `CMCD` query argument (the default: any CDN logs a URL), or
    /// in the `CMCD-Object` and `CMCD-Session` headers (no change to the URL, so caches keyed
    /// on it are not split; the CDN must accept the headers, which a browser origin's CORS
    /// must allow).
    public enum Transmission: String, Sendable, Equatable {
        case query
        case headers
    }

    public var transmission: Transmission

    public init(transmission: Transmission = .query) {
        self.transmission = transmission
    }
}

/// What one file of a download is to the player, kept in the plan: the CMCD object type, and
/// a name for it in the log.
enum MediaRole: String, Sendable, Codable, Equatable {
    case video, audio, muxed, subtitles, initSection, key, other

    /// CTA-5004's object type token.
    var objectType: String {
        switch self {
        case .video: "v"
        case .audio: "a"
        case .muxed: "av"
        case .subtitles: "c"
        case .initSection: "i"
        case .key: "k"
        case .other: "o"
        }
    }
}

extension MediaRole {
    /// What the segments of a `kind` stream are to a player.
    init(_ kind: TrackKind) {
        self = switch kind {
        case .video: .video
        case .audio: .audio
        case .text: .subtitles
        case .other: .other
        }
    }
}

/// The CMCD keys of one request, encoded as CTA-5004 says: keys in alphabetical order, strings
/// quoted and escaped as structured-field strings, tokens and integers bare.
struct CMCDRequestData: Sendable, Equatable {
    var objectType: String
    /// kbit/s.
    var bitrate: Int?
    var contentId: String?
    var sessionId: String
    var streamFormat: String

    /// The data of `file`, a file of a `kind` download of `assetId`, in session `sessionId`.
    init(file: DownloadFile, kind: DownloadRequest.Kind, assetId: String, sessionId: String) {
        objectType = (file.role ?? (file.isAncillary ? .other : file.isMedia ? .muxed : .key)).objectType
        // Rounded to the nearest kbit/s; a bit rate no stream could have is left out.
        bitrate = file.bitrate.flatMap { $0 > 0 && $0 < Int(Int32.max) ? ($0 + 500) / 1000 : nil }
        contentId = Self.isSendable(assetId) ? assetId : nil
        self.sessionId = sessionId
        streamFormat = switch kind {
        case .hls: "h"
        case .dash: "d"
        case .smooth: "s"
        default: "o"
        }
    }

    /// The `CMCD` query argument's value (before percent-encoding): every key.
    var queryValue: String {
        (objectKeys + sessionKeys).sorted { $0.key < $1.key }.map(\.text).joined(separator: ",")
    }

    /// `CMCD-Object` and `CMCD-Session`, each with its keys in order.
    var headers: [(name: String, value: String)] {
        [("CMCD-Object", objectKeys), ("CMCD-Session", sessionKeys)].compactMap { name, keys in
            keys.isEmpty ? nil : (name, keys.sorted { $0.key < $1.key }.map(\.text).joined(separator: ","))
        }
    }

    /// `url` with the `CMCD` query argument added after any it has.
    func adding(to url: URL) -> URL {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url }
        // Percent-encoded here, in full: `URLQueryItem` would leave `,` `=` and `"` as they are.
        let encoded = queryValue.addingPercentEncoding(withAllowedCharacters: Self.unreserved) ?? ""
        components.percentEncodedQuery = (components.percentEncodedQuery.map { $0 + "&" } ?? "") + "CMCD=" + encoded
        return components.url ?? url
    }

    private struct Key {
        var key: String
        var text: String
    }

    private var objectKeys: [Key] {
        var keys = [Key(key: "ot", text: "ot=\(objectType)")]
        if let bitrate { keys.append(Key(key: "br", text: "br=\(bitrate)")) }
        return keys
    }

    private var sessionKeys: [Key] {
        var keys = [
            Key(key: "sf", text: "sf=\(streamFormat)"), Key(key: "sid", text: "sid=\(Self.quoted(sessionId))"), Key(key: "st", text: "st=v"),
        ]
        if let contentId { keys.append(Key(key: "cid", text: "cid=\(Self.quoted(contentId))")) }
        return keys
    }

    /// At most 64 characters, each printable ASCII: what a CMCD string may hold.
    static func isSendable(_ value: String) -> Bool {
        value.utf8.count <= 64 && value.utf8.allSatisfy { (0x20...0x7E).contains($0) }
    }

    /// A structured-field string: `"` and `\` escaped.
    private static func quoted(_ value: String) -> String {
        "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    private static let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
}
