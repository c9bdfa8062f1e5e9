import Foundation

/// The files of one chosen Representation: its initialization segment and media segments, each
/// with its URL, byte range and time, listed from its segment information (`DASHManifest`).
/// Every number comes from the MPD and is checked: a timeline that never ends, a count past
/// the asset's segment budget, a time past 2^62 fail the manifest rather than trap or exhaust
/// memory. A `SegmentBase` Representation's segments come from its `sidx` (`SegmentIndex`),
/// which the downloader fetches first.
struct DASHTrack: Sendable, Equatable {
    struct Segment: Sendable, Equatable {
        var url: URL
        var byteRange: ByteRange?
        /// In `timescale` units, as the MPD's timeline counts (presentation time offset included).
        var time: Int64
        var duration: Int64
    }

    var initialization: (url: URL, byteRange: ByteRange?)?
    var segments: [Segment]
    var timescale: Int64
    var presentationTimeOffset: Int64
    /// The Representation is one file played whole (no segment information).
    var isWholeFile: Bool

    static func == (lhs: DASHTrack, rhs: DASHTrack) -> Bool {
        lhs.initialization?.url == rhs.initialization?.url && lhs.initialization?.byteRange == rhs.initialization?.byteRange
            && lhs.segments == rhs.segments && lhs.timescale == rhs.timescale
            && lhs.presentationTimeOffset == rhs.presentationTimeOffset && lhs.isWholeFile == rhs.isWholeFile
    }

    /// Seconds of media, from the segments' durations.
    var seconds: Double {
        Double(segments.reduce(Int64(0)) { $0.addingClamped($1.duration) }) / Double(timescale)
    }

    /// A `SegmentBase` Representation's index: where its `sidx` is, and its initialization range.
    struct Index: Sendable {
        var url: URL
        var indexRange: ByteRange
        var initialization: ByteRange?
        /// `Initialization@sourceURL`, when the initialization is in a file of its own.
        var initializationURL: URL?
        var timescale: Int64?
        var presentationTimeOffset: Int64
    }
}

enum DASHSegments {
    /// Largest `timescale` (ticks per second) accepted: `sidx` counts in 32 bits.
    static let maxTimescale = Int64(UInt32.max)

    /// The Representation's track, or for `SegmentBase` its index to fetch first.
    static func track(
        _ representation: DASHManifest.Representation, period: DASHManifest.Period, maxSegments: Int
    ) throws(MPDError) -> Either {
        let base = representation.baseURL
        switch representation.segmentInfo {
        case .wholeFile:
            let duration = Int64(nonNegative: (period.duration ?? 0) * 1000) ?? 0
            return .track(DASHTrack(
                initialization: nil, segments: [.init(url: base, byteRange: nil, time: 0, duration: duration)], timescale: 1000,
                presentationTimeOffset: 0, isWholeFile: true))
        case .base(let attributes, let initialization):
            guard let indexRange = attributes["indexRange"] else {
                // No index: the file is one segment.
                let duration = Int64(nonNegative: (period.duration ?? 0) * 1000) ?? 0
                return .track(DASHTrack(
                    initialization: nil, segments: [.init(url: base, byteRange: nil, time: 0, duration: duration)], timescale: 1000,
                    presentationTimeOffset: 0, isWholeFile: true))
            }
            return .index(DASHTrack.Index(
                url: base, indexRange: try MPDNumbers.byteRange(indexRange, "SegmentBase@indexRange"),
                initialization: try initialization?.attributes["range"].map { value throws(MPDError) in try MPDNumbers.byteRange(value, "Initialization@range") },
                initializationURL: try initialization?.attributes["sourceURL"].map { text throws(MPDError) in try DASHManifest.resolve(text, against: base) },
                timescale: try attributes["timescale"].map { value throws(MPDError) in try timescale(value) },
                presentationTimeOffset: try attributes["presentationTimeOffset"].map { value throws(MPDError) in try MPDNumbers.integer(value, "presentationTimeOffset") } ?? 0))
        case .template(let attributes, let timeline, let initializationElement):
            return .track(try template(attributes, timeline: timeline, initialization: initializationElement, representation: representation, period: period, maxSegments: maxSegments))
        case .list(let attributes, let timeline, let initializationElement, let urls):
            return .track(try list(attributes, timeline: timeline, initialization: initializationElement, urls: urls, base: base, period: period, maxSegments: maxSegments))
        }
    }

    enum Either: Sendable {
        case track(DASHTrack)
        case index(DASHTrack.Index)
    }

    private static func timescale(_ text: String) throws(MPDError) -> Int64 {
        let value = try MPDNumbers.integer(text, "timescale", max: maxTimescale)
        guard value > 0 else { throw MPDError("timescale is 0") }
        return value
    }

    /// The Period's end in `timescale` units after `offset`, when the Period's duration is known.
    private static func periodEnd(_ period: DASHManifest.Period, timescale: Int64, offset: Int64) throws(MPDError) -> Int64? {
        guard let seconds = period.duration else { return nil }
        guard let ticks = Int64(nonNegative: (seconds * Double(timescale)).rounded()) else { throw MPDError("the Period's duration in ticks does not fit 64 bits") }
        let (end, overflow) = offset.addingReportingOverflow(ticks)
        guard !overflow, end <= Int64(1) << 62 else { throw MPDError("the Period ends past 2^62 ticks") }
        return end
    }

    // MARK: SegmentTemplate

    private static func template(
        _ attributes: [String: String], timeline: MPDElement?, initialization: MPDElement?, representation: DASHManifest.Representation,
        period: DASHManifest.Period, maxSegments: Int
    ) throws(MPDError) -> DASHTrack {
        let scale = try attributes["timescale"].map { value throws(MPDError) in try timescale(value) } ?? 1
        let offset = try attributes["presentationTimeOffset"].map { value throws(MPDError) in try MPDNumbers.integer(value, "presentationTimeOffset") } ?? 0
        let startNumber = try attributes["startNumber"].map { value throws(MPDError) in try MPDNumbers.integer(value, "startNumber", max: Int64(1) << 53) } ?? 1
        guard let media = attributes["media"] else { throw MPDError("a SegmentTemplate has no media") }
        let mediaTemplate = try URLTemplate(media)
        let base = representation.baseURL
        let values = { (number: Int64, time: Int64) in
            URLTemplate.Values(representationId: representation.id, number: number, bandwidth: Int64(representation.bandwidth), time: time)
        }
        var initURL: URL?
        if let text = attributes["initialization"] ?? initialization?.attributes["sourceURL"] {
            let template = try URLTemplate(text)
            guard !template.uses(.number), !template.uses(.time) else { throw MPDError("an initialization template uses $Number$ or $Time$") }
            initURL = try DASHManifest.resolve(template.expand(values(startNumber, 0)), against: base)
        }
        let initRange = try initialization?.attributes["range"].map { value throws(MPDError) in try MPDNumbers.byteRange(value, "Initialization@range") }

        let times = try segmentTimes(attributes, timeline: timeline, timescale: scale, offset: offset, period: period, maxSegments: maxSegments)
        var segments: [DASHTrack.Segment] = []
        segments.reserveCapacity(times.count)
        var urlBytes = 0
        for (index, slot) in times.enumerated() {
            let (number, overflow) = startNumber.addingReportingOverflow(Int64(index))
            guard !overflow else { throw MPDError("segment numbers past 2^63") }
            let text = mediaTemplate.expand(values(number, slot.time))
            urlBytes += text.utf8.count
            guard urlBytes <= MPDDocument.maxTrackURLBytes else { throw MPDError("a Representation's segment URLs take more than \(MPDDocument.maxTrackURLBytes) bytes") }
            segments.append(.init(url: try DASHManifest.resolve(text, against: base), byteRange: nil, time: slot.time, duration: slot.duration))
        }
        return DASHTrack(
            initialization: initURL.map { ($0, initRange) }, segments: segments, timescale: scale, presentationTimeOffset: offset, isWholeFile: false)
    }

    /// Each segment's time and duration: from the `SegmentTimeline`, else from `@duration` over
    /// the Period's length.
    private static func segmentTimes(
        _ attributes: [String: String], timeline: MPDElement?, timescale: Int64, offset: Int64, period: DASHManifest.Period, maxSegments: Int
    ) throws(MPDError) -> [(time: Int64, duration: Int64)] {
        let end = try periodEnd(period, timescale: timescale, offset: offset)
        if let timeline { return try expand(timeline, end: end, maxSegments: maxSegments) }
        guard let durationText = attributes["duration"] else { throw MPDError("a SegmentTemplate has neither a duration nor a SegmentTimeline") }
        let duration = try MPDNumbers.integer(durationText, "SegmentTemplate@duration")
        guard duration > 0 else { throw MPDError("SegmentTemplate@duration is 0") }
        guard let end else { throw MPDError("segments of a fixed duration in a Period of unknown length") }
        let ticks = end - offset
        let count = ticks / duration + (ticks % duration == 0 ? 0 : 1)
        guard count <= Int64(maxSegments) else { throw MPDError("more than \(maxSegments) segments (the asset's budget)") }
        return (0..<Int(count)).map { index in
            let time = offset + Int64(index) * duration
            return (time, min(duration, end - time))
        }
    }

    /// A `SegmentTimeline`'s `S` elements, `@r` repeats included; `r="-1"` repeats to the next
    /// `S` or the Period's end. Stops at `maxSegments`.
    static func expand(_ timeline: MPDElement, end: Int64?, maxSegments: Int) throws(MPDError) -> [(time: Int64, duration: Int64)] {
        let entries = timeline.children("S")
        var result: [(time: Int64, duration: Int64)] = []
        var next: Int64 = 0
        for (index, entry) in entries.enumerated() {
            let start = try entry.attributes["t"].map { value throws(MPDError) in try MPDNumbers.integer(value, "S@t") } ?? next
            guard let durationText = entry.attributes["d"] else { throw MPDError("an S element has no d") }
            let duration = try MPDNumbers.integer(durationText, "S@d")
            guard duration > 0 else { throw MPDError("an S element's d is 0") }
            var repeats: Int64
            switch entry.attributes["r"] {
            case nil: repeats = 0
            case "-1"?:
                // Until the next S's start, else the Period's end.
                let until = try entries.dropFirst(index + 1).first?.attributes["t"].map { value throws(MPDError) in try MPDNumbers.integer(value, "S@t") } ?? end
                guard let until else { throw MPDError("r=\"-1\" in a Period of unknown length repeats without end") }
                guard until > start else { throw MPDError("r=\"-1\" where the timeline has already ended") }
                repeats = (until - start) / duration + ((until - start) % duration == 0 ? 0 : 1) - 1
            case let text?:
                repeats = try MPDNumbers.integer(text, "S@r")
            }
            guard repeats < Int64(maxSegments) - Int64(result.count) else { throw MPDError("more than \(maxSegments) segments (the asset's budget)") }
            var time = start
            for _ in 0...repeats {
                result.append((time, duration))
                let (after, overflow) = time.addingReportingOverflow(duration)
                guard !overflow, after <= Int64(1) << 62 else { throw MPDError("a segment time past 2^62") }
                time = after
            }
            next = time
        }
        return result
    }

    // MARK: SegmentList

    private static func list(
        _ attributes: [String: String], timeline: MPDElement?, initialization: MPDElement?, urls: [MPDElement], base: URL,
        period: DASHManifest.Period, maxSegments: Int
    ) throws(MPDError) -> DASHTrack {
        guard urls.count <= maxSegments else { throw MPDError("more than \(maxSegments) segments (the asset's budget)") }
        guard !urls.isEmpty else { throw MPDError("a SegmentList has no SegmentURL") }
        let scale = try attributes["timescale"].map { value throws(MPDError) in try timescale(value) } ?? 1
        let offset = try attributes["presentationTimeOffset"].map { value throws(MPDError) in try MPDNumbers.integer(value, "presentationTimeOffset") } ?? 0
        var times: [(time: Int64, duration: Int64)]
        if let timeline {
            times = try expand(timeline, end: try periodEnd(period, timescale: scale, offset: offset), maxSegments: maxSegments)
            guard times.count >= urls.count else { throw MPDError("a SegmentList has more SegmentURLs than its timeline has segments") }
        } else if let text = attributes["duration"] {
            let duration = try MPDNumbers.integer(text, "SegmentList@duration")
            guard duration > 0 else { throw MPDError("SegmentList@duration is 0") }
            guard duration.multipliedReportingOverflow(by: Int64(urls.count)).overflow == false,
                  offset.addingReportingOverflow(duration * Int64(urls.count)).overflow == false
            else { throw MPDError("a SegmentList longer than 2^63 ticks") }
            times = (0..<urls.count).map { (offset + Int64($0) * duration, duration) }
        } else if urls.count == 1 {
            let end = try periodEnd(period, timescale: scale, offset: offset) ?? offset
            times = [(offset, end - offset)]
        } else {
            throw MPDError("a SegmentList of several segments has neither a duration nor a SegmentTimeline")
        }
        var segments: [DASHTrack.Segment] = []
        segments.reserveCapacity(urls.count)
        for (element, slot) in zip(urls, times) {
            let url = try element.attributes["media"].map { text throws(MPDError) in try DASHManifest.resolve(text, against: base) } ?? base
            let range = try element.attributes["mediaRange"].map { value throws(MPDError) in try MPDNumbers.byteRange(value, "SegmentURL@mediaRange") }
            segments.append(.init(url: url, byteRange: range, time: slot.time, duration: slot.duration))
        }
        var initURL: URL?
        var initRange: ByteRange?
        if let initialization {
            initURL = try initialization.attributes["sourceURL"].map { text throws(MPDError) in try DASHManifest.resolve(text, against: base) } ?? base
            initRange = try initialization.attributes["range"].map { value throws(MPDError) in try MPDNumbers.byteRange(value, "Initialization@range") }
        }
        return DASHTrack(
            initialization: initURL.map { ($0, initRange) }, segments: segments, timescale: scale, presentationTimeOffset: offset, isWholeFile: false)
    }

    // MARK: SegmentBase

    /// A `SegmentBase` Representation's track from its `sidx` box, fetched from `index.indexRange`.
    static func track(_ index: DASHTrack.Index, sidx data: Data, maxSegments: Int) throws(MPDError) -> DASHTrack {
        let sidx = try SegmentIndex.parse(data, at: Int64(index.indexRange.offset), maxReferences: maxSegments)
        // Without `Initialization@range`, the initialization segment is what comes before the index.
        let initialization: (url: URL, byteRange: ByteRange?)?
        if let url = index.initializationURL {
            initialization = (url, index.initialization)
        } else {
            let range = index.initialization ?? (index.indexRange.offset > 0 ? ByteRange(length: index.indexRange.offset, offset: 0) : nil)
            initialization = range.map { (index.url, $0) }
        }
        var time = sidx.earliestPresentationTime
        var segments: [DASHTrack.Segment] = []
        segments.reserveCapacity(sidx.references.count)
        for reference in sidx.references {
            segments.append(.init(url: index.url, byteRange: reference.range, time: time, duration: reference.duration))
            let (after, overflow) = time.addingReportingOverflow(reference.duration)
            guard !overflow else { throw MPDError("the sidx's times pass 2^63") }
            time = after
        }
        // The MPD's offset is in its timescale (1 when it says none); the sidx's times in the sidx's own.
        var offset = index.presentationTimeOffset
        let mpdScale = index.timescale ?? 1
        if offset != 0, mpdScale != sidx.timescale {
            offset = Int64(nonNegative: (Double(offset) * Double(sidx.timescale) / Double(mpdScale)).rounded()) ?? 0
        }
        return DASHTrack(
            initialization: initialization, segments: segments, timescale: sidx.timescale,
            presentationTimeOffset: offset, isWholeFile: false)
    }
}

/// A `SegmentTemplate@media` or `@initialization` value: text with `$RepresentationID$`,
/// `$Number$`, `$Bandwidth$`, `$Time$` (the last three with an optional `%0<width>d`) and `$$`.
struct URLTemplate: Sendable {
    enum Identifier: Sendable, Equatable { case representationId, number, bandwidth, time }
    enum Part: Sendable, Equatable {
        case text(String)
        case value(Identifier, width: Int)
    }

    struct Values {
        var representationId: String
        var number: Int64
        var bandwidth: Int64
        var time: Int64
    }

    /// Widest `%0<width>d` accepted.
    static let maxWidth = 20

    let parts: [Part]

    init(_ text: String) throws(MPDError) {
        var parts: [Part] = []
        var rest = Substring(text)
        while let dollar = rest.firstIndex(of: "$") {
            if dollar > rest.startIndex { parts.append(.text(String(rest[..<dollar]))) }
            let afterDollar = rest.index(after: dollar)
            guard let closing = rest[afterDollar...].firstIndex(of: "$") else { throw MPDError("the template \"\(text.prefix(120))\" has a $ that is not closed") }
            let identifier = rest[afterDollar..<closing]
            rest = rest[rest.index(after: closing)...]
            if identifier.isEmpty {
                parts.append(.text("$"))
                continue
            }
            let name = identifier.prefix { $0 != "%" }
            let format = identifier.dropFirst(name.count)
            var width = 1
            if !format.isEmpty {
                // `%0<width>d` (or `%d`); nothing else is a format the standard allows.
                guard format.hasPrefix("%"), format.hasSuffix("d"), format.count >= 2 else {
                    throw MPDError("the template \"\(text.prefix(120))\" has a format that is not %0<width>d")
                }
                let digits = format.dropFirst().dropLast()
                if !digits.isEmpty {
                    guard digits.first == "0", let value = Int(decimalInteger: digits.dropFirst()), (1...Self.maxWidth).contains(value) else {
                        throw MPDError("the template \"\(text.prefix(120))\" has a width that is not %0<1 to \(Self.maxWidth)>d")
                    }
                    width = value
                }
            }
            switch name {
            case "RepresentationID":
                guard format.isEmpty else { throw MPDError("$RepresentationID$ takes no format") }
                parts.append(.value(.representationId, width: 1))
            case "Number": parts.append(.value(.number, width: width))
            case "Bandwidth": parts.append(.value(.bandwidth, width: width))
            case "Time": parts.append(.value(.time, width: width))
            default: throw MPDError("the template \"\(text.prefix(120))\" names $\(name.prefix(40))$, which the SDK does not know")
            }
        }
        if !rest.isEmpty { parts.append(.text(String(rest))) }
        self.parts = parts
    }

    func uses(_ identifier: Identifier) -> Bool {
        parts.contains { if case .value(identifier, _) = $0 { true } else { false } }
    }

    func expand(_ values: Values) -> String {
        var out = ""
        for part in parts {
            switch part {
            case .text(let text): out += text
            case .value(.representationId, _): out += values.representationId
            case .value(let identifier, let width):
                let number = switch identifier {
                case .number: values.number
                case .bandwidth: values.bandwidth
                default: values.time
                }
                let digits = String(number)
                if digits.count < width { out += String(repeating: "0", count: width - digits.count) }
                out += digits
            }
        }
        return out
    }
}
