import Foundation

/// What downloading an HLS asset means, worked out once from its playlists as `HLSPlanner`
/// fetched and parsed them when it was queued (kept under `original/` in the asset's directory):
/// the variant and renditions the request chose, every segment, init section and key to fetch,
/// and the local playlists (`HLSPlaylistWriter`) that let a player play the download from
/// `file://` with no network.
///
/// Local layout: `index.m3u8` (the master, or the media playlist when the asset has no master),
/// one media playlist per chosen stream (`video.m3u8`, `audio-0.m3u8`, `subtitles-0.m3u8`), its
/// files in a directory of the same name, and keys in `keys/`. A sub-range of a remote file
/// becomes a whole local file, so local playlists have no byte ranges. Media sequence numbers
/// are kept, so AES-128 keys without an IV decrypt as before.
enum HLSPlan {
    static let originalAsset = "\(AssetLayout.originalDirectory)/asset.m3u8"
    static let indexPlaylist = "index.m3u8"

    /// A media playlist chosen for download and the name of its local copy.
    struct Stream: Sendable {
        var name: String
        var url: URL
        /// Bits per second, for the estimate.
        var bandwidth: Int?
        /// What its segments are to a player, and its declared `BANDWIDTH` (CMCD).
        var role: MediaRole = .muxed
        var bitrate: Int? = nil
        var original: String { "\(AssetLayout.originalDirectory)/\(name).m3u8" }
    }

    /// The streams `request` chooses from the asset's playlist: for a master, the variant and
    /// its renditions by language; for a media playlist, itself.
    static func streams(of playlist: HLSPlaylist, request: DownloadRequest) -> (master: MasterChoice?, streams: [Stream]) {
        guard case .master(let master) = playlist else {
            return (nil, [Stream(name: "video", url: request.url, bandwidth: nil)])
        }
        let variant = master.variant(maxBitrate: request.maxVideoBitrate)
        let audio = master.renditions(.audio, group: variant.audioGroup, languages: request.audioLanguages)
        let subtitles = master.renditions(.subtitles, group: variant.subtitlesGroup, languages: request.subtitleLanguages)
        // A variant whose audio group has playlists of its own carries video alone; otherwise
        // (no group, or renditions without a URI) its audio is in it.
        let separateAudio = master.renditions(.audio, group: variant.audioGroup, languages: nil).contains { $0.url != nil }
        var streams = [Stream(
            name: "video", url: variant.url, bandwidth: variant.averageBandwidth ?? variant.bandwidth,
            role: variant.audioGroup != nil && separateAudio ? .video : .muxed, bitrate: variant.bandwidth)]
        var named: [(HLSMasterPlaylist.Rendition, String?)] = []
        for (kind, renditions) in [("audio", audio), ("subtitles", subtitles)] {
            for rendition in renditions {
                guard let url = rendition.url else {
                    named.append((rendition, nil))
                    continue
                }
                let name = "\(kind)-\(streams.count - 1)"
                streams.append(Stream(name: name, url: url, bandwidth: nil, role: kind == "audio" ? .audio : .subtitles))
                named.append((rendition, name))
            }
        }
        return (MasterChoice(variant: variant, renditions: named), streams)
    }

    /// What the local master playlist lists.
    struct MasterChoice: Sendable {
        var variant: HLSMasterPlaylist.Variant
        /// Each rendition kept, with its local stream's name (nil: carried in the variant).
        var renditions: [(HLSMasterPlaylist.Rendition, String?)]
    }

    /// The plan from the chosen streams' media playlists, as parsed when they were fetched
    /// (`master`: what the local master lists, nil when the asset's playlist is a media playlist).
    /// Throws `.playlist` for a live playlist, and for one with nothing in `timeRange`.
    static func make(
        master: MasterChoice?, streams: [(stream: Stream, media: HLSMediaPlaylist)], timeRange: MediaTimeRange? = nil
    ) throws(DownloadFailure) -> DownloadPlan {
        var files: [DownloadFile] = []
        var written: [DownloadPlan.WrittenFile] = []
        var keyPaths: [URL: String] = [:]
        var estimate: Int64? = 0
        var keyIds: [Data] = []
        var master = master
        for (number, (stream, whole)) in streams.enumerated() {
            guard whole.isComplete else { throw liveFailure(stream.url) }
            var media = whole
            if let timeRange {
                guard let cut = whole.within(timeRange) else {
                    // The variant's playlist with nothing in range fails the download; a
                    // rendition (audio a little shorter than the video) is left out.
                    if number == 0 { throw timeRange.nothingIn(stream.url.absoluteString, lasting: whole.duration) }
                    master?.renditions.removeAll { $0.1 == stream.name }
                    continue
                }
                media = cut
            }
            // Keys named by id (the license provider's), each once, in playlist order.
            for segment in media.segments {
                for key in [segment.key, segment.initSection?.key ?? nil].compactMap({ $0 }) {
                    if let keyId = key.keyId, !keyIds.contains(keyId) { keyIds.append(keyId) }
                }
            }
            let perSecond = stream.bandwidth.map { Double($0) / 8 }
            if stream.bandwidth == nil, stream.name == "video" { estimate = nil }
            let local = HLSPlaylistWriter.media(
                media, stream: stream, keyPaths: &keyPaths, files: &files, bytesPerSecond: perSecond)
            written.append(.init(path: master == nil ? indexPlaylist : "\(stream.name).m3u8", text: local))
            // BANDWIDTH is the playlist's: the product may not fit, and then there is no estimate.
            if let perSecond, let sum = estimate { estimate = Int64(nonNegative: perSecond * media.duration).map(sum.addingClamped) }
        }
        if let master { written.append(.init(path: indexPlaylist, text: HLSPlaylistWriter.master(master))) }
        return DownloadPlan(
            files: files, written: written, mainPath: indexPlaylist, estimatedBytes: estimate, keyIds: keyIds.isEmpty ? nil : keyIds)
    }

    static func liveFailure(_ url: URL) -> DownloadFailure {
        DownloadFailure(.playlist, "\(url.absoluteString) is a live playlist (no #EXT-X-ENDLIST); only VOD can be downloaded.")
    }
}

extension HLSMediaPlaylist {
    /// The playlist cut to the segments that overlap `range` (whole segments), each keeping its
    /// media sequence number, so that a key without an IV decrypts as before, and its
    /// discontinuity sequence; nil when none does. Every media
    /// playlist counts from its own first segment, as a player lines renditions up.
    func within(_ range: MediaTimeRange) -> HLSMediaPlaylist? {
        var kept: [Segment] = []
        var time = 0.0
        for segment in segments {
            if range.overlaps(from: time, duration: segment.duration) { kept.append(segment) }
            time += segment.duration
        }
        guard let first = kept.first else { return nil }
        var cut = self
        cut.segments = kept
        cut.mediaSequence = first.sequence
        // The discontinuities left behind count in the sequence, as a sliding live window's do.
        let dropped = segments.prefix { $0.sequence < first.sequence }
        cut.discontinuitySequence = discontinuitySequence + dropped.filter(\.discontinuity).count + (first.discontinuity ? 1 : 0)
        cut.segments[0].discontinuity = false
        return cut
    }
}
