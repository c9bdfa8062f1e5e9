import Foundation

/// What downloading a DASH asset means, worked out once from its MPD (and, for single-file
/// Representations, their `sidx`) as `DASHPlanner` fetched them when it was queued: in each
/// Period the video Representation the bit-rate rule picks (`BitrateChoice`, as for HLS), one
/// Representation of each audio and text AdaptationSet in the languages asked for, every file
/// to fetch, and the local MPD (`MPDWriter`) that plays the download with no network.
///
/// Local layout: `index.mpd`, and one directory per chosen Representation
/// (`period-<n>/video`, `period-<n>/audio-<k>`, `period-<n>/text-<k>`) holding `init.<ext>` and
/// the segments `1.<ext>`, `2.<ext>`, … A byte range of a remote file becomes a whole local
/// file, so the local MPD lists every segment by number with its timeline.
enum DASHPlan {
    static let originalManifest = "\(AssetLayout.originalDirectory)/asset.mpd"
    static let indexManifest = "index.mpd"

    /// A Representation chosen for download and its local directory's name.
    struct Choice: Sendable {
        var period: Int
        var set: DASHManifest.AdaptationSet
        var representation: DASHManifest.Representation
        var name: String
    }

    /// The Representations `request` chooses, Period by Period.
    static func choose(_ manifest: DASHManifest, request: DownloadRequest) -> [Choice] {
        var choices: [Choice] = []
        for (index, period) in manifest.periods.enumerated() {
            let prefix = "period-\(index)"
            let videos = period.adaptationSets.filter { $0.kind == .video && !$0.isTrickPlay }
                .flatMap { set in set.representations.map { (set, $0) } }
            if let (set, representation) = BitrateChoice.choose(videos, maxBitrate: request.maxVideoBitrate, bandwidth: { $0.1.bandwidth }) {
                choices.append(Choice(period: index, set: set, representation: representation, name: "\(prefix)/video"))
            }
            // One Representation of each audio and text set: the best it offers.
            for (set, representation, name) in TrackChoice.byLanguage(
                period.adaptationSets.filter { !$0.isTrickPlay }, request: request, kind: \.kind, language: \.language,
                levels: \.representations, bitrate: \.bandwidth)
            {
                choices.append(Choice(period: index, set: set, representation: representation, name: "\(prefix)/\(name)"))
            }
        }
        return choices
    }

    /// The plan from the chosen Representations' tracks (`timing`: where the Periods of a
    /// presentation cut to a time range lie, `cut(_:chosen:to:url:)`).
    static func make(_ manifest: DASHManifest, chosen: [(choice: Choice, track: DASHTrack)], timing: Timing? = nil) -> DownloadPlan {
        var files: [DownloadFile] = []
        var estimate: Int64? = 0
        var local: [MPDWriter.LocalRepresentation] = []
        for (choice, track) in chosen {
            let bandwidth = choice.representation.bandwidth
            let role = MediaRole(choice.set.kind)
            let perTick = bandwidth > 0 ? Double(bandwidth) / 8 / Double(track.timescale) : nil
            if bandwidth == 0, choice.set.kind == .video { estimate = nil }
            var initPath: String?
            if let initialization = track.initialization {
                let path = "\(choice.name)/init.\(DownloadFile.fileExtension(initialization.url, default: "mp4"))"
                files.append(DownloadFile(
                    url: initialization.url, byteRange: initialization.byteRange, relativePath: path, isMedia: true, sizeRule: .initSection,
                    role: .initSection, bitrate: bandwidth > 0 ? bandwidth : nil))
                initPath = path
            }
            let ext = DownloadFile.fileExtension(track.segments[0].url, default: track.isWholeFile ? "bin" : "m4s")
            for (index, segment) in track.segments.enumerated() {
                let path = track.isWholeFile ? "\(choice.name)/file.\(ext)" : "\(choice.name)/\(index + 1).\(ext)"
                files.append(DownloadFile(
                    url: segment.url, byteRange: segment.byteRange, relativePath: path, isMedia: true,
                    estimatedBytes: perTick.flatMap { Int64(nonNegative: $0 * Double(segment.duration)) }, role: role,
                    bitrate: bandwidth > 0 ? bandwidth : nil))
            }
            if let perTick, let sum = estimate {
                let ticks = track.segments.reduce(Int64(0)) { $0.addingClamped($1.duration) }
                estimate = Int64(nonNegative: perTick * Double(ticks)).map(sum.addingClamped)
            }
            local.append(MPDWriter.LocalRepresentation(
                choice: choice, track: track, initialization: initPath, media: track.isWholeFile ? "\(choice.name)/file.\(ext)" : "\(choice.name)/$Number$.\(ext)"))
        }
        let unique = ContentProtection.each(chosen.lazy.flatMap { choice, _ in
            (choice.set.element.children("ContentProtection") + choice.representation.element.children("ContentProtection")).lazy.map(ContentProtection.init)
        })
        return DownloadPlan(
            files: files, written: [.init(path: indexManifest, text: MPDWriter.local(manifest, representations: local, timing: timing))],
            mainPath: indexManifest, estimatedBytes: estimate, contentProtection: unique.isEmpty ? nil : unique)
    }
}

/// Writes a downloaded DASH asset's local MPD: static, the Periods with only the chosen
/// Representations, each naming only local files (a `SegmentTemplate` by number with the
/// track's `SegmentTimeline`, or a `BaseURL` for a file played whole). What describes the media
/// (`ContentProtection`, `Role`, `Label`, audio channels, accessibility, properties) is kept as
/// it was; what locates it remotely (`BaseURL`, segment information, `Location`) is not.
enum MPDWriter {
    struct LocalRepresentation {
        var choice: DASHPlan.Choice
        var track: DASHTrack
        var initialization: String?
        /// A `$Number$` template of local paths, or the local path of a whole file.
        var media: String
    }

    /// Child elements of AdaptationSets and Representations that describe the media.
    static let keptChildren: Set<String> = [
        "ContentProtection", "Role", "Accessibility", "Label", "AudioChannelConfiguration", "EssentialProperty", "SupplementalProperty",
        "Viewpoint", "Rating", "InbandEventStream", "FramePacking",
    ]

    static func local(_ manifest: DASHManifest, representations: [LocalRepresentation], timing: DASHPlan.Timing? = nil) -> String {
        var rootAttributes = manifest.root.attributes
        rootAttributes["type"] = "static"
        for dynamicOnly in ["availabilityStartTime", "minimumUpdatePeriod", "timeShiftBufferDepth", "publishTime", "availabilityEndTime"] {
            rootAttributes[dynamicOnly] = nil
        }
        if let timing { rootAttributes["mediaPresentationDuration"] = timing.total.map(seconds) }
        var lines = ["<?xml version=\"1.0\" encoding=\"UTF-8\"?>", "<\(manifest.root.qualifiedName)\(MPDElement.attributeText(rootAttributes))>"]
        for child in manifest.root.children where child.name == "ContentProtection" { lines.append(child.xml(indent: "  ")) }
        let byPeriod = Dictionary(grouping: representations, by: \.choice.period)
        for (index, period) in manifest.periods.enumerated() {
            guard let inPeriod = byPeriod[index] else { continue }
            var periodAttributes = period.element.attributes
            let placed = timing?.periods[index] ?? (period.start, period.duration)
            periodAttributes["start"] = seconds(placed.start)
            periodAttributes["duration"] = placed.duration.map(seconds)
            lines.append("  <\(period.element.qualifiedName)\(MPDElement.attributeText(periodAttributes))>")
            for local in inPeriod {
                let set = local.choice.set.element
                lines.append("    <\(set.qualifiedName)\(MPDElement.attributeText(set.attributes))>")
                for child in set.children where keptChildren.contains(child.name) { lines.append(child.xml(indent: "      ")) }
                let representation = local.choice.representation.element
                lines.append("      <\(representation.qualifiedName)\(MPDElement.attributeText(representation.attributes))>")
                for child in representation.children where keptChildren.contains(child.name) { lines.append(child.xml(indent: "        ")) }
                lines += segmentLines(local, indent: "        ")
                lines.append("      </\(representation.qualifiedName)>")
                lines.append("    </\(set.qualifiedName)>")
            }
            lines.append("  </\(period.element.qualifiedName)>")
        }
        lines.append("</\(manifest.root.qualifiedName)>")
        return lines.joined(separator: "\n") + "\n"
    }

    private static func segmentLines(_ local: LocalRepresentation, indent: String) -> [String] {
        let track = local.track
        if track.isWholeFile { return ["\(indent)<BaseURL>\(MPDElement.escaped(local.media))</BaseURL>"] }
        var template = "\(indent)<SegmentTemplate timescale=\"\(track.timescale)\""
        if track.presentationTimeOffset != 0 { template += " presentationTimeOffset=\"\(track.presentationTimeOffset)\"" }
        if let initialization = local.initialization { template += " initialization=\"\(MPDElement.escaped(initialization))\"" }
        template += " media=\"\(MPDElement.escaped(local.media))\" startNumber=\"1\">"
        var lines = [template, "\(indent)  <SegmentTimeline>"]
        // Runs of segments of one duration, each following the last, as one S with a repeat.
        var index = 0
        let segments = track.segments
        while index < segments.count {
            let first = segments[index]
            var repeats = 0
            while index + repeats + 1 < segments.count, segments[index + repeats + 1].duration == first.duration,
                  segments[index + repeats + 1].time == segments[index + repeats].time.addingClamped(first.duration) {
                repeats += 1
            }
            lines.append("\(indent)    <S t=\"\(first.time)\" d=\"\(first.duration)\"\(repeats > 0 ? " r=\"\(repeats)\"" : "")/>")
            index += repeats + 1
        }
        lines += ["\(indent)  </SegmentTimeline>", "\(indent)</SegmentTemplate>"]
        return lines
    }

    /// Seconds as an `xs:duration`.
    static func seconds(_ value: Double) -> String {
        "PT\(String(format: "%.3f", value))S"
    }
}
