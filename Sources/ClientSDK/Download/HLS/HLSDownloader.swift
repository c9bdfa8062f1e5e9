import Foundation

/// HLS VOD: when the asset is queued, fetches its playlist and the media playlists of the
/// streams the request chooses (kept under `original/`), parses each once as it arrives, and
/// keeps the plan made from them (`AssetLayout.plan`), so the download never reads a playlist
/// again. An HTML page, a malformed or a live playlist, or playlists past `limits`, fail here.
struct HLSDownloader: Downloader {
    let fetcher: FileFetcher
    let limits: PlaylistLimits

    func prepare(_ request: DownloadRequest, in directory: URL, room: Int64, ceiling: Int64) async throws(DownloadFailure) -> DownloadPlan {
        let originals = directory.appendingPathComponent(AssetLayout.originalDirectory)
        try? FileManager.default.removeItem(at: originals)
        var left = PlaylistAllowance(limit: limits.bytes, bytes: limits.bytes, room: room, ceiling: ceiling)
        var segmentsLeft = limits.segments
        let assetPlaylist = try await fetchAndParse(request.url, to: directory.appendingPathComponent(HLSPlan.originalAsset), left: &left, segments: segmentsLeft)
        let (master, streams) = HLSPlan.streams(of: assetPlaylist, request: request)
        var chosen: [(stream: HLSPlan.Stream, media: HLSMediaPlaylist)] = []
        if master == nil, case .media(let own) = assetPlaylist {
            chosen = streams.map { ($0, own) }
        } else {
            for stream in streams {
                let fetched = try await fetchAndParse(stream.url, to: directory.appendingPathComponent(stream.original), left: &left, segments: segmentsLeft)
                guard case .media(let media) = fetched else {
                    throw DownloadFailure(.playlist, "\(stream.url.absoluteString) is a master playlist where a media playlist belongs.")
                }
                segmentsLeft -= media.segments.count
                chosen.append((stream, media))
            }
        }
        let plan = try HLSPlan.make(master: master, streams: chosen)
        // The download is carried out from the plan whenever it runs, also after a system crash:
        // the plan and the playlists (each flushed before its rename) are flushed, then their
        // names, up to the data directory.
        let planFile = directory.appendingPathComponent(AssetLayout.plan, isDirectory: false)
        do {
            try JSONEncoder().encode(plan).write(to: planFile, options: .atomic)
            try await LocalFiles.waitingForTheDisk {
                try LocalFiles.flush(path: planFile, fully: false)
                try LocalFiles.flush(path: originals, isDirectory: true, fully: false)
                try LocalFiles.flushAssetDirectory(directory)
            }
        } catch {
            throw DownloadFailure(.storage, "Could not keep the plan of \(request.assetId): \(error).")
        }
        return plan
    }

    func preparedPlan(_ request: DownloadRequest, in directory: URL) -> DownloadPlan? {
        guard let data = try? Data(contentsOf: directory.appendingPathComponent(AssetLayout.plan, isDirectory: false)) else { return nil }
        // One this version cannot read is made again from the origin.
        return try? JSONDecoder().decode(DownloadPlan.self, from: data)
    }

    /// Fetches a playlist to `file` and parses it, once. Playlists are flushed whatever
    /// `DownloadOptions.flushesFiles` says: they are fetched once, and the plan is made from them.
    /// Each is held to what the asset's playlist budget and the storage rules leave (`left`), and
    /// to `HLSPlaylist.maxBytes`; its segments to `segments`.
    private func fetchAndParse(_ url: URL, to file: URL, left: inout PlaylistAllowance, segments: Int) async throws(DownloadFailure) -> HLSPlaylist {
        var flushing = fetcher
        flushing.flushes = true
        let allowance = min(left.bytes, Int64(HLSPlaylist.maxBytes))
        let size: Int64
        do {
            size = try await flushing.fetch(.init(url: url), to: file, budget: StorageBudget(min(allowance, left.room), ceiling: left.ceiling))
        } catch where error.kind == .noSpace {
            // Past the playlists' own limit: the playlist is the problem, for good. Past the
            // storage rules' room: the queue waits for room, as for any file.
            guard allowance <= left.room else { throw DownloadFailure(.noSpace, error.message) }
            let limit = allowance < Int64(HLSPlaylist.maxBytes)
                ? "the asset's playlists are larger than \(left.limit) bytes in all" : "\(HLSPlaylistError.tooLarge(HLSPlaylist.maxBytes))"
            throw DownloadFailure(.playlist, "\(url.absoluteString): \(limit)")
        }
        left.bytes -= size
        left.room -= size
        do {
            return try HLSPlaylist.parse(Data(contentsOf: file), url: url, maxSegments: segments)
        } catch {
            throw DownloadFailure(.playlist, "\(url.absoluteString): \(error)")
        }
    }

    /// What an asset's playlists may still take while they are fetched.
    private struct PlaylistAllowance {
        /// `PlaylistLimits.bytes`, for the message.
        let limit: Int64
        /// Left of it.
        var bytes: Int64
        /// Left of what the storage rules allow.
        var room: Int64
        /// The most the storage rules could ever allow.
        let ceiling: Int64
    }
}
