import Foundation

/// HLS VOD: when the asset is queued, fetches its playlist and the media playlists of the
/// streams the request chooses (kept under `original/`), parses each once as it arrives, and
/// keeps the plan made from them (`AssetLayout.plan`), so the download never reads a playlist
/// again. An HTML page, a malformed or a live playlist, or playlists past `limits`, fail here.
struct HLSPlanner: ManifestPlanner {
    let fetcher: FileFetcher
    let limits: PlaylistLimits
    let retry: FetchRetry

    func prepare(_ request: DownloadRequest, in directory: URL, room: Int64, ceiling: Int64) async throws(DownloadFailure) -> DownloadPlan {
        var manifests = manifestFetcher(afresh: directory, room: room, ceiling: ceiling)
        var segmentsLeft = limits.segments
        let assetPlaylist = try await fetchAndParse(request.url, to: directory.appendingPathComponent(HLSPlan.originalAsset), manifests: &manifests, segments: segmentsLeft)
        let (master, streams) = HLSPlan.streams(of: assetPlaylist, request: request)
        var chosen: [(stream: HLSPlan.Stream, media: HLSMediaPlaylist)] = []
        if master == nil, case .media(let own) = assetPlaylist {
            chosen = streams.map { ($0, own) }
        } else {
            for stream in streams {
                let fetched = try await fetchAndParse(stream.url, to: directory.appendingPathComponent(stream.original), manifests: &manifests, segments: segmentsLeft)
                guard case .media(let media) = fetched else {
                    throw DownloadFailure(.playlist, "\(stream.url.absoluteString) is a master playlist where a media playlist belongs.")
                }
                segmentsLeft -= media.segments.count
                chosen.append((stream, media))
            }
        }
        let plan = try HLSPlan.make(master: master, streams: chosen, timeRange: request.timeRange)
        try await plan.keep(in: directory, assetId: request.assetId)
        return plan
    }

    /// Fetches a playlist to `file` and parses it, once; its segments are held to `segments`.
    private func fetchAndParse(_ url: URL, to file: URL, manifests: inout ManifestFetcher, segments: Int) async throws(DownloadFailure) -> HLSPlaylist {
        let data = try await manifests.fetch(url, to: file, maxBytes: HLSPlaylist.maxBytes, tooLarge: "\(HLSPlaylistError.tooLarge(HLSPlaylist.maxBytes))")
        do {
            return try HLSPlaylist.parse(data, url: url, maxSegments: segments)
        } catch {
            throw DownloadFailure(.playlist, "\(url.absoluteString): \(error)")
        }
    }
}
