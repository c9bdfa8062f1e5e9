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
        for (stream, level, name) in TrackChoice.byLanguage(
            manifest.streams, request: request, kind: \.kind, language: \.language, levels: \.qualityLevels, bitrate: \.bitrate)
        {
            choices.append(Choice(stream: stream, level: level, name: name))
        }
        return choices
    }

    /// The plan from the chosen streams. With `timeRange`, each keeps the whole fragments that
    /// overlap it, in seconds from where the earliest chosen stream starts (one clock for all,
    /// so audio stays with video); a stream with nothing in it is left out, and the download
    /// fails only when every one is. Fragment times are kept.
    static func make(
        _ manifest: SmoothManifest, chosen: [Choice], url: URL, timeRange: MediaTimeRange?
    ) throws(DownloadFailure) -> DownloadPlan {
        let origin = chosen.map { seconds($0.stream.fragments[0].time, $0.stream) }.min() ?? 0
        var kept: [(Choice, [SmoothManifest.Fragment])] = []
        for choice in chosen {
            let stream = choice.stream
            let fragments = timeRange.map { range in
                stream.fragments.filter { range.overlaps(from: seconds($0.time, stream) - origin, duration: seconds($0.duration, stream)) }
            } ?? stream.fragments
            if !fragments.isEmpty { kept.append((choice, fragments)) }
        }
        guard !kept.isEmpty else {
            let end = chosen.map { seconds($0.stream.fragments[$0.stream.fragments.count - 1].time + $0.stream.fragments[$0.stream.fragments.count - 1].duration, $0.stream) }.max() ?? 0
            throw (timeRange ?? MediaTimeRange()).nothingIn(url.absoluteString, lasting: end - origin)
        }
        var files: [DownloadFile] = []
        var estimate: Int64? = 0
        for (choice, fragments) in kept {
            let stream = choice.stream
            let bitrate = choice.level.bitrate > 0 ? choice.level.bitrate : nil
            let perTick = bitrate.map { Double($0) / 8 / Double(stream.timescale) }
            var urlBytes = 0
            for fragment in fragments {
                let remote = try fragmentURL(stream.urlTemplate, level: choice.level, time: fragment.time, base: url)
                urlBytes += remote.absoluteString.utf8.count
                guard urlBytes <= MPDDocument.maxTrackURLBytes else {
                    throw DownloadFailure(.playlist, "\(url.absoluteString): a stream's fragment URLs take more than \(MPDDocument.maxTrackURLBytes) bytes.")
                }
                files.append(DownloadFile(
                    url: remote, byteRange: nil, relativePath: "\(choice.name)/\(fragment.time).m4s", isMedia: true,
                    estimatedBytes: perTick.flatMap { Int64(nonNegative: $0 * Double(fragment.duration)) }, role: MediaRole(stream.kind),
                    bitrate: bitrate))
            }
            if let perTick, let sum = estimate {
                let ticks = fragments.reduce(Int64(0)) { $0.addingClamped($1.duration) }
                estimate = Int64(nonNegative: perTick * Double(ticks)).map(sum.addingClamped)
            } else if stream.kind == .video {
                estimate = nil
            }
        }
        // What is kept lasts from its earliest fragment to its latest end (the whole title's
        // Duration would let a player seek where nothing is on disk).
        let first = kept.map { seconds($0.1[0].time, $0.0.stream) }.min() ?? 0
        let last = kept.map { seconds($0.1[$0.1.count - 1].time + $0.1[$0.1.count - 1].duration, $0.0.stream) }.max() ?? 0
        let duration = timeRange == nil ? nil : Int64(nonNegative: ((last - first) * Double(manifest.timescale)).rounded())
        return DownloadPlan(
            files: files, written: [.init(path: indexManifest, text: SmoothManifestWriter.local(manifest, streams: kept, duration: duration))],
            mainPath: indexManifest, estimatedBytes: estimate, contentProtection: manifest.protection.isEmpty ? nil : manifest.protection)
    }

    /// A time of `stream`'s in seconds.
    private static func seconds(_ ticks: Int64, _ stream: SmoothManifest.Stream) -> Double {
        Double(ticks) / Double(stream.timescale)
    }

    /// A fragment's URL: the stream's `Url` with the quality level's bit rate and custom
    /// attributes (percent-encoded: they are names and values of any text) and the fragment's
    /// start time, resolved against the manifest's URL as an MPD's are.
    static func fragmentURL(_ template: String, level: SmoothManifest.QualityLevel, time: Int64, base: URL) throws(DownloadFailure) -> URL {
        let custom = level.customAttributes.map { $0.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? "" } ?? ""
        let text = template
            .replacingOccurrences(of: "{bitrate}", with: String(level.bitrate))
            .replacingOccurrences(of: "{Bitrate}", with: String(level.bitrate))
            .replacingOccurrences(of: "{CustomAttributes}", with: custom)
            .replacingOccurrences(of: "{start time}", with: String(time))
            .replacingOccurrences(of: "{start_time}", with: String(time))
        do {
            return try DASHManifest.resolve(text, against: base)
        } catch {
            throw DownloadFailure(.playlist, "\(base.absoluteString): the fragment URL \(text.prefix(200)): \(error.message).")
        }
    }
}

/// Writes a downloaded Smooth Streaming asset's local manifest: the root as it was (VOD), its
/// `Protection` kept for the player, and only the chosen streams, each with its one quality
/// level and a `Url` of local files by start time, and every fragment kept with its `t` and `d`
/// (a player need not work times out, and ffmpeg's manifests, which start after 0 without
/// saying so, play).
enum SmoothManifestWriter {
    /// `duration`: the kept part's, in the root's timescale, for a download of part of a title.
    static func local(_ manifest: SmoothManifest, streams: [(SmoothPlan.Choice, [SmoothManifest.Fragment])], duration: Int64? = nil) -> String {
        let root = manifest.root
        var attributes = root.attributes
        if let duration { attributes["Duration"] = String(duration) }
        var lines = ["<?xml version=\"1.0\" encoding=\"UTF-8\"?>", "<\(root.qualifiedName)\(MPDElement.attributeText(attributes))>"]
        for child in root.children where child.name == "Protection" { lines.append(child.xml(indent: "  ")) }
        for (choice, fragments) in streams {
            var indexAttributes = choice.stream.element.attributes
            indexAttributes["Url"] = "\(choice.name)/{start time}.m4s"
            indexAttributes["QualityLevels"] = "1"
            indexAttributes["Chunks"] = String(fragments.count)
            lines.append("  <\(choice.stream.element.qualifiedName)\(MPDElement.attributeText(indexAttributes))>")
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
