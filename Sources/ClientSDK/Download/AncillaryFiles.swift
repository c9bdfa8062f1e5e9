import Foundation

/// A file that travels with a title (artwork, thumbnails, a JSON sidecar): named by the request
/// (`DownloadRequest.ancillaries`), downloaded with the asset into its directory, counted in its
/// size and storage, served by the playback server and deleted with it. One that fails does not
/// fail the title; it is reported (`downloadWarning`, `ancillaryFailed`) and left out of
/// `DownloadAsset.ancillaries`.
public struct AncillaryFile: Sendable, Equatable, Codable {
    /// The app's name for it (`poster`, `thumbnails`, `sidecar`): 1 to 64 ASCII letters, digits,
    /// `-` and `_`, unique within the request.
    public var tag: String
    /// http or https.
    public var url: URL

    public init(tag: String, url: URL) {
        self.tag = tag
        self.url = url
    }

    /// Most ancillary files one request may name.
    public static let maxPerAsset = 32

    /// Where it lives in the asset's directory: `ancillary/<tag>.<extension of its URL>`.
    var relativePath: String { "ancillary/\(tag).\(DownloadFile.fileExtension(url, default: "bin"))" }

    /// Why a request's ancillary files cannot be downloaded, or nil.
    static func problem(_ files: [AncillaryFile]) -> String? {
        if files.count > maxPerAsset { return "A request may name at most \(maxPerAsset) ancillary files." }
        var tags: Set<String> = []
        for file in files {
            guard (1...64).contains(file.tag.utf8.count), file.tag.utf8.allSatisfy({ $0 < 0x80 && (Character(UnicodeScalar($0)).isLetter
                || Character(UnicodeScalar($0)).isNumber || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")) })
            else { return "An ancillary file's tag is 1 to 64 ASCII letters, digits, - and _; \(file.tag.prefix(80).debugDescription) is not." }
            guard tags.insert(file.tag).inserted else { return "The ancillary tag \(file.tag) is named twice." }
            guard let scheme = file.url.scheme?.lowercased(), scheme == "http" || scheme == "https", file.url.host?.isEmpty == false else {
                return "The ancillary file \(file.tag) has a URL that is not http(s)."
            }
        }
        return nil
    }
}

/// An ancillary file on the device: `DownloadAsset.ancillaries`.
public struct DownloadedAncillary: Sendable, Equatable {
    public var tag: String
    /// Under the asset's directory; the playback server serves it at `playback.url(for:ancillary:)`.
    public var localURL: URL
}

/// Adds the request's ancillary files to whatever plan its format's downloader makes (a plan
/// kept before a request named any gains them as well), so that every format downloads,
/// counts and serves them the same way.
struct AncillaryAdding: DownloadPlanner {
    let format: any DownloadPlanner

    func prepare(_ request: DownloadRequest, in directory: URL, room: Int64, ceiling: Int64) async throws(DownloadFailure) -> DownloadPlan {
        Self.adding(request, to: try await format.prepare(request, in: directory, room: room, ceiling: ceiling))
    }

    func preparedPlan(_ request: DownloadRequest, in directory: URL) -> DownloadPlan? {
        format.preparedPlan(request, in: directory).map { Self.adding(request, to: $0) }
    }

    static func adding(_ request: DownloadRequest, to plan: DownloadPlan) -> DownloadPlan {
        var plan = plan
        let present = Set(plan.files.map(\.relativePath))
        for file in request.ancillaries where !present.contains(file.relativePath) {
            plan.files.append(DownloadFile(url: file.url, byteRange: nil, relativePath: file.relativePath, isMedia: false, isAncillary: true, role: .other))
        }
        return plan
    }
}
