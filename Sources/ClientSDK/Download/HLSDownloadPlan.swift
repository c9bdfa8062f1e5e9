import Foundation

/// One file of a download: where it comes from and where it goes in the asset's directory.
struct DownloadFile: Sendable, Equatable {
    var url: URL
    var byteRange: HLSMediaPlaylist.ByteRange?
    /// Relative to the asset's directory.
    var relativePath: String
    /// Media is checked against the asset's MIME allow-list; keys and playlists are not.
    var isMedia: Bool
    /// Bytes expected before the answer says (bandwidth × duration); nil when unknown.
    var estimatedBytes: Int64?
}

/// What downloading an HLS asset means, worked out from its playlists as fetched when it was
/// queued (kept under `original/` in the asset's directory): the variant and renditions the
/// request chose, every segment, init section and key to fetch, and the local playlists that
/// let a player play the download from `file://` with no network.
///
/// Local layout: `index.m3u8` (the master, or the media playlist when the asset has no master),
/// one media playlist per chosen stream (`video.m3u8`, `audio-0.m3u8`, `subtitles-0.m3u8`), its
/// files in a directory of the same name, and keys in `keys/`. A sub-range of a remote file
/// becomes a whole local file, so local playlists have no byte ranges. Media sequence numbers
/// are kept, so AES-128 keys without an IV decrypt as before.
struct HLSDownloadPlan: Sendable {
    var files: [DownloadFile]
    /// Local playlists to write, by path relative to the asset's directory, once every file is in.
    var playlists: [(path: String, text: String)]
    /// Bandwidth × duration of the chosen streams, when the master says their bandwidth.
    var estimatedBytes: Int64?

    static let originalDirectory = "original"
    static let originalAsset = "original/asset.m3u8"
    static let indexPlaylist = "index.m3u8"

    /// A media playlist chosen for download and the name of its local copy.
    struct Stream: Sendable {
        var name: String
        var url: URL
        /// Bits per second, for the estimate.
        var bandwidth: Int?
        var original: String { "\(HLSDownloadPlan.originalDirectory)/\(name).m3u8" }
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
        var streams = [Stream(name: "video", url: variant.url, bandwidth: variant.averageBandwidth ?? variant.bandwidth)]
        var named: [(HLSMasterPlaylist.Rendition, String?)] = []
        for (kind, renditions) in [("audio", audio), ("subtitles", subtitles)] {
            for rendition in renditions {
                guard let url = rendition.url else {
                    named.append((rendition, nil))
                    continue
                }
                let name = "\(kind)-\(streams.count - 1)"
                streams.append(Stream(name: name, url: url, bandwidth: nil))
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

    /// Builds the plan from the originals in `directory`; nil when one is missing (not fetched
    /// yet); throws `.playlist` when they are unusable, `maxSegments` in all included.
    static func make(request: DownloadRequest, directory: URL, maxSegments: Int) throws(DownloadFailure) -> HLSDownloadPlan? {
        var segmentsLeft = maxSegments
        guard let assetPlaylist = try read(directory.appendingPathComponent(originalAsset), url: request.url, maxSegments: segmentsLeft) else {
            return nil
        }
        let (master, streams) = streams(of: assetPlaylist, request: request)
        var files: [DownloadFile] = []
        var playlists: [(String, String)] = []
        var keyPaths: [URL: String] = [:]
        var estimate: Int64? = 0
        for stream in streams {
            let media: HLSMediaPlaylist
            if master == nil, case .media(let own) = assetPlaylist {
                media = own
            } else {
                guard let read = try read(directory.appendingPathComponent(stream.original), url: stream.url, maxSegments: segmentsLeft) else {
                    return nil
                }
                guard case .media(let parsed) = read else {
                    throw DownloadFailure(.playlist, "\(stream.url.absoluteString) is a master playlist where a media playlist belongs.")
                }
                media = parsed
            }
            segmentsLeft -= media.segments.count
            guard media.isComplete else { throw liveFailure(stream.url) }
            let perSecond = stream.bandwidth.map { Double($0) / 8 }
            if stream.bandwidth == nil, stream.name == "video" { estimate = nil }
            let local = localMedia(media, stream: stream, keyPaths: &keyPaths, files: &files, bytesPerSecond: perSecond)
            playlists.append((master == nil ? indexPlaylist : "\(stream.name).m3u8", local))
            // BANDWIDTH is the playlist's: the product may not fit, and then there is no estimate.
            if let perSecond, let sum = estimate { estimate = Int64(nonNegative: perSecond * media.duration).map(sum.addingClamped) }
        }
        if let master { playlists.append((indexPlaylist, localMaster(master))) }
        return HLSDownloadPlan(files: files, playlists: playlists, estimatedBytes: estimate)
    }

    static func liveFailure(_ url: URL) -> DownloadFailure {
        DownloadFailure(.playlist, "\(url.absoluteString) is a live playlist (no #EXT-X-ENDLIST); only VOD can be downloaded.")
    }

    /// Nil when the file is not there.
    private static func read(_ file: URL, url: URL, maxSegments: Int) throws(DownloadFailure) -> HLSPlaylist? {
        guard let data = try? Data(contentsOf: file) else { return nil }
        do {
            return try HLSPlaylist.parse(data, url: url, maxSegments: maxSegments)
        } catch {
            throw DownloadFailure(.playlist, "\(url.absoluteString): \(error)")
        }
    }

    /// The media playlist rewritten to local files, adding each file to `files`.
    private static func localMedia(
        _ media: HLSMediaPlaylist, stream: Stream, keyPaths: inout [URL: String], files: inout [DownloadFile], bytesPerSecond: Double?
    ) -> String {
        var lines = [
            "#EXTM3U", "#EXT-X-VERSION:7", "#EXT-X-TARGETDURATION:\(media.targetDuration)",
            "#EXT-X-MEDIA-SEQUENCE:\(media.mediaSequence)", "#EXT-X-PLAYLIST-TYPE:VOD",
        ]
        var currentKey: HLSMediaPlaylist.Key?
        var currentInit: HLSMediaPlaylist.InitSection?
        var initPaths: [HLSMediaPlaylist.InitSection: String] = [:]
        for (index, segment) in media.segments.enumerated() {
            if segment.key != currentKey {
                currentKey = segment.key
                lines.append(keyLine(segment.key, keyPaths: &keyPaths, files: &files))
            }
            if let initSection = segment.initSection, initSection != currentInit {
                currentInit = initSection
                let path = initPaths[initSection] ?? {
                    let path = "\(stream.name)/init-\(initPaths.count).\(fileExtension(initSection.url, default: "mp4"))"
                    initPaths[initSection] = path
                    files.append(DownloadFile(url: initSection.url, byteRange: initSection.byteRange, relativePath: path, isMedia: true))
                    return path
                }()
                lines.append("#EXT-X-MAP:URI=\"\(path)\"")
            }
            let path = "\(stream.name)/\(index).\(fileExtension(segment.url, default: "ts"))"
            files.append(DownloadFile(
                url: segment.url, byteRange: segment.byteRange, relativePath: path, isMedia: true,
                estimatedBytes: bytesPerSecond.flatMap { Int64(nonNegative: $0 * segment.duration) }))
            lines.append("#EXTINF:\(segment.duration),")
            lines.append(path)
        }
        lines.append("#EXT-X-ENDLIST")
        return lines.joined(separator: "\n") + "\n"
    }

    /// `EXT-X-KEY` for the segments that follow: a downloadable key points at its local copy;
    /// another format keeps its URI for the app's license provider.
    private static func keyLine(_ key: HLSMediaPlaylist.Key?, keyPaths: inout [URL: String], files: inout [DownloadFile]) -> String {
        guard let key else { return "#EXT-X-KEY:METHOD=NONE" }
        let method = switch key.method {
        case .none: "NONE"
        case .aes128: "AES-128"
        case .sampleAES: "SAMPLE-AES"
        case .other(let name): name
        }
        var uri = key.url?.absoluteString ?? ""
        if key.isDownloadable, let url = key.url {
            uri = keyPaths[url] ?? {
                let path = "keys/\(keyPaths.count).key"
                keyPaths[url] = path
                files.append(DownloadFile(url: url, byteRange: nil, relativePath: path, isMedia: false))
                return path
            }()
        }
        var line = "#EXT-X-KEY:METHOD=\(method),URI=\"\(uri)\""
        if let iv = key.iv { line += ",IV=\(iv)" }
        if let format = key.format { line += ",KEYFORMAT=\"\(format)\"" }
        return line
    }

    private static func localMaster(_ choice: MasterChoice) -> String {
        var lines = ["#EXTM3U", "#EXT-X-VERSION:7"]
        for (rendition, name) in choice.renditions {
            var line = "#EXT-X-MEDIA:TYPE=\(rendition.kind.rawValue),GROUP-ID=\"\(rendition.groupId)\",NAME=\"\(rendition.name)\""
            if let language = rendition.language { line += ",LANGUAGE=\"\(language)\"" }
            line += ",DEFAULT=\(rendition.isDefault ? "YES" : "NO"),AUTOSELECT=YES"
            if let name { line += ",URI=\"\(name).m3u8\"" }
            lines.append(line)
        }
        let variant = choice.variant
        var stream = "#EXT-X-STREAM-INF:BANDWIDTH=\(variant.bandwidth)"
        if let average = variant.averageBandwidth { stream += ",AVERAGE-BANDWIDTH=\(average)" }
        if let codecs = variant.codecs { stream += ",CODECS=\"\(codecs)\"" }
        if let resolution = variant.resolution { stream += ",RESOLUTION=\(resolution)" }
        let kept = Set(choice.renditions.map { "\($0.0.kind.rawValue)/\($0.0.groupId)" })
        if let group = variant.audioGroup, kept.contains("AUDIO/\(group)") { stream += ",AUDIO=\"\(group)\"" }
        if let group = variant.subtitlesGroup, kept.contains("SUBTITLES/\(group)") { stream += ",SUBTITLES=\"\(group)\"" }
        lines.append(stream)
        lines.append("video.m3u8")
        return lines.joined(separator: "\n") + "\n"
    }

    /// The URL's extension when it is a short alphanumeric one, else `fallback`.
    private static func fileExtension(_ url: URL, default fallback: String) -> String {
        let ext = url.pathExtension.lowercased()
        return (1...5).contains(ext.count) && ext.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) ? ext : fallback
    }
}
