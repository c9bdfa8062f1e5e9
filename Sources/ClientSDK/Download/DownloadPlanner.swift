import Foundation

/// One format's planner (what Media3 calls a `Downloader`, made by its `DownloaderFactory`; here
/// it only plans): it turns a request into a plan (`prepare`, when the asset is queued: fetching
/// and checking whatever must be known first, such as an HLS asset's playlists), and gives the
/// plan back when the download starts (`preparedPlan`). `AssetDownloader` carries a plan out,
/// whatever its format. A new format is a new `DownloadPlanner` and a case of `DownloadPlanners`.
protocol DownloadPlanner: Sendable {
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

/// A planner that reads manifests from the origin (HLS, DASH, Smooth Streaming): it fetches them
/// afresh into `original/` through one `ManifestFetcher` (the asset's manifest budget, always
/// flushed), and keeps its plan there (`AssetLayout.plan`) for the download to read back.
protocol ManifestPlanner: DownloadPlanner {
    var fetcher: FileFetcher { get }
    var limits: PlaylistLimits { get }
    var retry: FetchRetry { get }
}

extension ManifestPlanner {
    /// The fetcher of a new plan's manifests for `directory`: what an earlier one fetched goes first.
    func manifestFetcher(afresh directory: URL, room: Int64, ceiling: Int64) -> ManifestFetcher {
        try? FileManager.default.removeItem(at: directory.appendingPathComponent(AssetLayout.originalDirectory))
        return ManifestFetcher(fetcher: fetcher, limits: limits, room: room, ceiling: ceiling, retry: retry)
    }

    func preparedPlan(_ request: DownloadRequest, in directory: URL) -> DownloadPlan? {
        DownloadPlan.kept(in: directory)
    }
}

/// The planner of a kind this SDK does not know: a request of a later SDK's kind, read from
/// its database after the app was rolled back. It fails at once, for good.
struct UnsupportedKind: DownloadPlanner {
    let kind: DownloadRequest.Kind

    func prepare(_ request: DownloadRequest, in directory: URL, room: Int64, ceiling: Int64) async throws(DownloadFailure) -> DownloadPlan {
        throw DownloadFailure(.playlist, "This SDK does not download assets of kind '\(kind)'.")
    }

    func preparedPlan(_ request: DownloadRequest, in directory: URL) -> DownloadPlan? { nil }
}

/// The planner of each kind of request.
struct DownloadPlanners: Sendable {
    let fetcher: FileFetcher
    let playlistLimits: PlaylistLimits
    /// How each manifest a planner reads is tried (`FetchRetry`), as every file is.
    var retry = FetchRetry()

    func planner(for kind: DownloadRequest.Kind) -> any DownloadPlanner {
        let format: any DownloadPlanner = switch kind {
        case .file: ProgressivePlanner()
        case .hls: HLSPlanner(fetcher: fetcher, limits: playlistLimits, retry: retry)
        case .dash: DASHPlanner(fetcher: fetcher, limits: playlistLimits, retry: retry)
        case .smooth: SmoothPlanner(fetcher: fetcher, limits: playlistLimits, retry: retry)
        default: UnsupportedKind(kind: kind)
        }
        return AncillaryAdding(format: format)
    }

    /// The same planners with every manifest tried once (queueing: `FetchRetry.once`).
    var tryingOnce: DownloadPlanners {
        var once = self
        once.retry = retry.once
        return once
    }
}
