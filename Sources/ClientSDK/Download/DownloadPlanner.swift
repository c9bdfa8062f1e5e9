import Foundation

/// One format's downloader, as Media3's `Downloader` made by its `DownloaderFactory`: it turns a
/// request into a plan (`prepare`, when the asset is queued: fetching and checking whatever must
/// be known first, such as an HLS asset's playlists), and gives the plan back when the download
/// starts (`preparedPlan`). `AssetDownloader` carries a plan out, whatever its format. A new
/// format is a new `Downloader` and a case of `DownloaderFactory`.
protocol Downloader: Sendable {
    /// Makes the plan of `request`, keeping what it fetched, and the plan when it took fetching
    /// to make, in `directory` (`AssetLayout`). `room`: what the storage rules leave now, which
    /// what it fetches counts against; `ceiling`: the most they could ever leave. Throws what
    /// queueing reports: `.playlist` for a playlist that can never be downloaded, a passing
    /// failure (`isPassing`) when it could not fetch now.
    func prepare(_ request: DownloadRequest, in directory: URL, room: Int64, ceiling: Int64) async throws(DownloadFailure) -> DownloadPlan

    /// The plan `prepare` made, or nil when it must be made again (the asset was queued while
    /// its origin could not be reached, or its directory was renamed since).
    func preparedPlan(_ request: DownloadRequest, in directory: URL) -> DownloadPlan?
}

/// The downloader of a kind this SDK does not know: a request of a later SDK's kind, read from
/// its database after the app was rolled back. It fails at once, for good.
struct UnsupportedKind: Downloader {
    let kind: DownloadRequest.Kind

    func prepare(_ request: DownloadRequest, in directory: URL, room: Int64, ceiling: Int64) async throws(DownloadFailure) -> DownloadPlan {
        throw DownloadFailure(.playlist, "This SDK does not download assets of kind '\(kind)'.")
    }

    func preparedPlan(_ request: DownloadRequest, in directory: URL) -> DownloadPlan? { nil }
}

/// The downloader of each kind of request.
struct DownloaderFactory: Sendable {
    let fetcher: FileFetcher
    let playlistLimits: PlaylistLimits
    /// How each manifest a downloader reads is tried (`FetchRetry`), as every file is.
    var retry = FetchRetry()

    func downloader(for kind: DownloadRequest.Kind) -> any Downloader {
        let format: any Downloader = switch kind {
        case .file: ProgressiveDownloader()
        case .hls: HLSDownloader(fetcher: fetcher, limits: playlistLimits, retry: retry)
        case .dash: DASHDownloader(fetcher: fetcher, limits: playlistLimits, retry: retry)
        default: UnsupportedKind(kind: kind)
        }
        return AncillaryAdding(format: format)
    }

    /// The same downloaders with every manifest tried once (queueing: `FetchRetry.once`).
    var tryingOnce: DownloaderFactory {
        var once = self
        once.retry = retry.once
        return once
    }
}

/// What downloading an asset means: every file to fetch, and the files the download writes
/// itself once they are in (an HLS asset's local playlists). Made once, when the asset is
/// queued; carried out, resumed and checked from this, never from the origin's playlists again.
struct DownloadPlan: Sendable, Codable, Equatable {
    var files: [DownloadFile]
    /// Written once every fetched file is in, by path relative to the asset's directory.
    var written: [WrittenFile] = []
    /// The file a player opens, relative to the asset's directory.
    var mainPath: String
    /// Bandwidth × duration of the chosen streams, when the playlists say their bandwidth.
    var estimatedBytes: Int64?
    /// DASH: the chosen streams' `ContentProtection`, for the license provider.
    var contentProtection: [ContentProtection]? = nil

    struct WrittenFile: Sendable, Codable, Equatable {
        var path: String
        var text: String
    }
}

/// One file of a download: where it comes from and where it goes in the asset's directory.
struct DownloadFile: Sendable, Equatable, Codable {
    var url: URL
    var byteRange: HLSMediaPlaylist.ByteRange?
    /// Relative to the asset's directory.
    var relativePath: String
    /// Media is checked against the asset's MIME allow-list; keys and playlists are not.
    var isMedia: Bool
    /// Bytes expected before the answer says (bandwidth × duration); nil when unknown.
    var estimatedBytes: Int64?
    /// One of the request's ancillary files: a failure is reported, not the asset's.
    var isAncillary: Bool = false
    /// The size its format fixes or bounds (a key, an init section), checked as it arrives.
    var sizeRule: FileSizeRule?

    init(
        url: URL, byteRange: HLSMediaPlaylist.ByteRange?, relativePath: String, isMedia: Bool, estimatedBytes: Int64? = nil, isAncillary: Bool = false,
        sizeRule: FileSizeRule? = nil
    ) {
        self.url = url
        self.byteRange = byteRange
        self.relativePath = relativePath
        self.isMedia = isMedia
        self.estimatedBytes = estimatedBytes
        self.isAncillary = isAncillary
        self.sizeRule = sizeRule
    }

    /// The URL's extension when it is a short alphanumeric one, else `fallback`: local names
    /// keep a file's type without taking anything else from the origin.
    static func fileExtension(_ url: URL, default fallback: String) -> String {
        let ext = url.pathExtension.lowercased()
        return (1...5).contains(ext.count) && ext.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) ? ext : fallback
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        url = try container.decode(URL.self, forKey: .url)
        byteRange = try container.decodeIfPresent(HLSMediaPlaylist.ByteRange.self, forKey: .byteRange)
        relativePath = try container.decode(String.self, forKey: .relativePath)
        isMedia = try container.decode(Bool.self, forKey: .isMedia)
        estimatedBytes = try container.decodeIfPresent(Int64.self, forKey: .estimatedBytes)
        // Plans kept before ancillary files existed have none.
        isAncillary = try container.decodeIfPresent(Bool.self, forKey: .isAncillary) ?? false
        // Plans kept before size rules existed have none: their keys and init sections are
        // held to the storage rules only, as they were when planned.
        sizeRule = try container.decodeIfPresent(FileSizeRule.self, forKey: .sizeRule)
    }
}

/// The layout of an asset's directory that every format shares: what a downloader fetched to
/// make its plan, and the plan, live under `original/`, which is not the asset's media (not
/// counted in its size, kept when its media is removed to be fetched again).
enum AssetLayout {
    static let originalDirectory = "original"
    static let plan = "original/plan.json"
    /// Names a downloaded file may not take at the top of the directory.
    static let reservedNames: Set<String> = [originalDirectory, ancillaryDirectory]
    /// Where a request's ancillary files go (`AncillaryFile`).
    static let ancillaryDirectory = "ancillary"
}
