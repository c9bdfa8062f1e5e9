import Foundation

/// Writes the local playlists of a downloaded HLS asset: the parser's (`HLSPlaylist`) other
/// half. Local playlists name only local files (a sub-range of a remote file becomes a whole
/// local file, so they have no byte ranges), keep the media sequence numbers (AES-128 keys
/// without an IV decrypt as before) and the discontinuities, and are VOD.
enum HLSPlaylistWriter {
    /// The media playlist rewritten to local files under `stream`'s name, adding each file to
    /// `files` (a key once, whichever playlists share it: `keyPaths`).
    static func media(
        _ media: HLSMediaPlaylist, stream chosen: HLSPlan.Stream, keyPaths: inout [URL: String], files: inout [DownloadFile],
        bytesPerSecond: Double?
    ) -> String {
        let stream = chosen.name
        var lines = [
            "#EXTM3U", "#EXT-X-VERSION:7", "#EXT-X-TARGETDURATION:\(media.targetDuration)",
            "#EXT-X-MEDIA-SEQUENCE:\(media.mediaSequence)", "#EXT-X-PLAYLIST-TYPE:VOD",
        ]
        if media.discontinuitySequence > 0 { lines.append("#EXT-X-DISCONTINUITY-SEQUENCE:\(media.discontinuitySequence)") }
        var currentKey: HLSMediaPlaylist.Key?
        var currentInit: HLSMediaPlaylist.InitSection?
        var initPaths: [HLSMediaPlaylist.InitSection: String] = [:]
        for (index, segment) in media.segments.enumerated() {
            if segment.discontinuity { lines.append("#EXT-X-DISCONTINUITY") }
            if let initSection = segment.initSection, initSection != currentInit {
                // The key the section was under where its map stood (none: a clear section
                // before the segments' key), so that the local playlist says the same.
                if initSection.key != currentKey {
                    currentKey = initSection.key
                    lines.append(keyLine(initSection.key, keyPaths: &keyPaths, files: &files))
                }
                currentInit = initSection
                let path = initPaths[initSection] ?? {
                    let path = "\(stream)/init-\(initPaths.count).\(DownloadFile.fileExtension(initSection.url, default: "mp4"))"
                    initPaths[initSection] = path
                    files.append(DownloadFile(
                        url: initSection.url, byteRange: initSection.byteRange, relativePath: path, isMedia: true, sizeRule: .initSection,
                        role: .initSection, bitrate: chosen.bitrate))
                    return path
                }()
                lines.append("#EXT-X-MAP:URI=\"\(path)\"")
            }
            if segment.key != currentKey {
                currentKey = segment.key
                lines.append(keyLine(segment.key, keyPaths: &keyPaths, files: &files))
            }
            let path = "\(stream)/\(index).\(DownloadFile.fileExtension(segment.url, default: "ts"))"
            files.append(DownloadFile(
                url: segment.url, byteRange: segment.byteRange, relativePath: path, isMedia: true,
                estimatedBytes: bytesPerSecond.flatMap { Int64(nonNegative: $0 * segment.duration) }, role: chosen.role,
                bitrate: chosen.bitrate))
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
        var uri = key.keyId != nil ? key.uri : key.url?.absoluteString ?? key.uri
        if key.isDownloadable, let url = key.url {
            uri = keyPaths[url] ?? {
                let path = "\(AssetLayout.keysDirectory)/\(keyPaths.count).key"
                keyPaths[url] = path
                files.append(DownloadFile(
                    url: url, byteRange: nil, relativePath: path, isMedia: false, sizeRule: FileSizeRule.key(key.method), role: .key))
                return path
            }()
        }
        var line = "#EXT-X-KEY:METHOD=\(method),URI=\"\(uri)\""
        if let iv = key.iv { line += ",IV=\(iv)" }
        if let format = key.format { line += ",KEYFORMAT=\"\(format)\"" }
        return line
    }

    /// The local master: the chosen variant and the renditions kept, each at its local playlist.
    static func master(_ choice: HLSPlan.MasterChoice) -> String {
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
}
