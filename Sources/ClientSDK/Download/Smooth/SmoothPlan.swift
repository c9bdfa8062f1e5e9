import Foundation

/// What downloading a Smooth Streaming asset means, worked out once from its client manifest as
/// `SmoothPlanner` fetched it when it was queued: the video quality level the bit-rate rule
/// picks over every video stream (`BitrateChoice`, as for HLS and DASH), each audio and text
/// stream in the languages asked for (its best quality level), every fragment to fetch, and
/// the local manifest (`SmoothManifestWriter`) that plays the download with no network.
///
/// Local layout: `Manifest` (the name Smooth Streaming servers give it: players take the
/// directory it is in as the fragments' base, GStreamer's `mssdemux` only when the URL ends so),
/// and one directory per chosen stream (`video`, `audio-<k>`, `text-<k>`) holding its fragments
/// by start time (`<t>.m4s`). The local manifest keeps the fragments' times, so a fragment's
/// local name follows from the manifest as its remote URL did.
enum SmoothPlan {
    static let originalManifest = "\(AssetLayout.originalDirectory)/asset.ismc"
    static let indexManifest = "Manifest"

    /// A stream chosen for download, its quality level, and its local directory's name.
    struct Choice: Sendable {
        var stream: SmoothManifest.Stream
        var level: SmoothManifest.QualityLevel
        var name: String
    }

    /// The streams and quality levels `request` chooses.
    static func choose(_ manifest: SmoothManifest, request: DownloadRequest) -> [Choice] {
        var choices: [Choice] = []
        let videos = manifest.streams.filter { $0.kind == .video }.flatMap { stream in stream.qualityLevels.map { (stream, $0) } }
        if let (stream, level) = BitrateChoice.choose(videos, maxBitrate: request.maxVideoBitrate, bandwidth: { $0.1.bitrate }) {
            choices.append(Choice(stream: stream, level: level, name: "video"))
        }
        for (kind, languages, name) in [(SmoothManifest.Stream.Kind.audio, request.audioLanguages, "audio"), (.text, request.subtitleLanguages, "text")] {
            var count = 0
            for stream in manifest.streams where stream.kind == kind {
                if let languages {
                    guard let language = stream.language, LanguageCodes.matches(language, anyOf: languages) else { continue }
                }
                guard let level = BitrateChoice.choose(stream.qualityLevels, maxBitrate: nil, bandwidth: \.bitrate) else { continue }
                choices.append(Choice(stream: stream, level: level, name: "\(name)-\(count)"))
                count += 1
            }
        }
        return choices
    }

    /// The plan from the chosen streams, each cut to `timeRange` (whole fragments, times kept).
    static func make(
        _ manifest: SmoothManifest, chosen: [Choice], url: URL, timeRange: MediaTimeRange?
    ) throws(DownloadFailure) -> DownloadPlan {
        var files: [DownloadFile] = []
        var estimate: Int64? = 0
        var kept: [(Choice, [SmoothManifest.Fragment])] = []
        for choice in chosen {
            let stream = choice.stream
            let scale = Double(stream.timescale)
            let start = stream.fragments[0].time
            let fragments = timeRange.map { range in
                stream.fragments.filter { range.overlaps(from: Double($0.time - start) / scale, duration: Double($0.duration) / scale) }
            } ?? stream.fragments
            guard !fragments.isEmpty else {
                let last = stream.fragments[stream.fragments.count - 1]
                throw (timeRange ?? MediaTimeRange()).nothingIn(url.absoluteString, lasting: Double(last.time + last.duration - start) / scale)
            }
            let role: MediaRole = switch stream.kind {
            case .video: .video
            case .audio: .audio
            case .text: .subtitles
            case .other: .other
            }
            let perTick = choice.level.bitrate > 0 ? Double(choice.level.bitrate) / 8 / scale : nil
            for fragment in fragments {
                files.append(DownloadFile(
                    url: try fragmentURL(stream.urlTemplate, level: choice.level, time: fragment.time, base: url),
                    byteRange: nil, relativePath: "\(choice.name)/\(fragment.time).m4s", isMedia: true,
                    estimatedBytes: perTick.flatMap { Int64(nonNegative: $0 * Double(fragment.duration)) }, role: role,
                    bitrate: choice.level.bitrate > 0 ? choice.level.bitrate : nil))
            }
            if let perTick, let sum = estimate {
                let ticks = fragments.reduce(Int64(0)) { $0.addingClamped($1.duration) }
                estimate = Int64(nonNegative: perTick * Double(ticks)).map(sum.addingClamped)
            } else if choice.stream.kind == .video {
                estimate = nil
            }
            kept.append((choice, fragments))
        }
        return DownloadPlan(
            files: files, written: [.init(path: indexManifest, text: SmoothManifestWriter.local(manifest, streams: kept))],
            mainPath: indexManifest, estimatedBytes: estimate, contentProtection: manifest.protection.isEmpty ? nil : manifest.protection)
    }

    /// A fragment's URL: the stream's `Url` with the quality level's bit rate and custom
    /// attributes and the fragment's start time, resolved against the manifest's URL.
    static func fragmentURL(_ template: String, level: SmoothManifest.QualityLevel, time: Int64, base: URL) throws(DownloadFailure) -> URL {
        let path = template
            .replacingOccurrences(of: "{bitrate}", with: String(level.bitrate))
            .replacingOccurrences(of: "{Bitrate}", with: String(level.bitrate))
            .replacingOccurrences(of: "{CustomAttributes}", with: level.customAttributes ?? "")
            .replacingOccurrences(of: "{start time}", with: String(time))
            .replacingOccurrences(of: "{start_time}", with: String(time))
        let escaped = path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.union(CharacterSet(charactersIn: "?&")))
        guard let escaped, let url = URL(string: escaped, relativeTo: base)?.absoluteURL, let scheme = url.scheme?.lowercased(),
              scheme == "http" || scheme == "https", url.host?.isEmpty == false
        else {
            throw DownloadFailure(.playlist, "\(base.absoluteString): the fragment URL \(path.prefix(200)) is not an http(s) URL.")
        }
        return url
    }
}

/// Writes a downloaded Smooth Streaming asset's local manifest: the root as it was (VOD), its
/// `Protection` kept for the player, and only the chosen streams, each with its one quality
/// level and a `Url` of local files by start time, and every fragment kept with its `t` and `d`
/// (a player need not work times out, and ffmpeg's manifests, which start after 0 without
/// saying so, play).
enum SmoothManifestWriter {
    static func local(_ manifest: SmoothManifest, streams: [(SmoothPlan.Choice, [SmoothManifest.Fragment])]) -> String {
        let root = manifest.root
        var lines = ["<?xml version=\"1.0\" encoding=\"UTF-8\"?>", "<\(root.qualifiedName)\(MPDElement.attributeText(root.attributes))>"]
        for child in root.children where child.name == "Protection" { lines.append(child.xml(indent: "  ")) }
        for (choice, fragments) in streams {
            var attributes = choice.stream.element.attributes
            attributes["Url"] = "\(choice.name)/{start time}.m4s"
            attributes["QualityLevels"] = "1"
            attributes["Chunks"] = String(fragments.count)
            lines.append("  <\(choice.stream.element.qualifiedName)\(MPDElement.attributeText(attributes))>")
            var level = choice.level.element
            level.attributes["Index"] = "0"
            lines.append(level.xml(indent: "    "))
            for (number, fragment) in fragments.enumerated() {
                lines.append("    <c n=\"\(number)\" t=\"\(fragment.time)\" d=\"\(fragment.duration)\"/>")
            }
            lines.append("  </\(choice.stream.element.qualifiedName)>")
        }
        lines.append("</\(root.qualifiedName)>")
        return lines.joined(separator: "\n") + "\n"
    }
}
