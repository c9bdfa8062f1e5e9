import Foundation

/// A static MPD (ISO/IEC 23009-1) as the download engine needs it: its Periods with their
/// timing, their AdaptationSets by kind and language, and each Representation's bandwidth,
/// `BaseURL` (resolved through every level, from the MPD's own URL) and segment information,
/// merged across levels as the standard says (a lower level's attributes override a higher
/// one's; `SegmentTimeline`, `SegmentURL`s and `Initialization` come from the lowest level that
/// has them). Segments are listed only for the Representations chosen (`DASHSegments`).
struct DASHManifest: Sendable {
    var root: MPDElement
    var periods: [Period]
    /// `mediaPresentationDuration`, in seconds.
    var duration: Double?

    struct Period: Sendable {
        var element: MPDElement
        /// Seconds from the presentation's start.
        var start: Double
        /// Nil when neither the Period, the next one nor the MPD says.
        var duration: Double?
        var adaptationSets: [AdaptationSet]
    }

    struct AdaptationSet: Sendable {
        typealias Kind = TrackKind
        var element: MPDElement
        var kind: Kind
        var language: String?
        /// A trick-play set (`EssentialProperty` of DASH-IF's trickmode): never downloaded.
        var isTrickPlay: Bool
        var representations: [Representation]
    }

    struct Representation: Sendable {
        var element: MPDElement
        var id: String
        /// Bits per second (`@bandwidth`; 0 when missing).
        var bandwidth: Int
        var baseURL: URL
        var segmentInfo: SegmentInfo
    }

    /// Where a Representation's segments are, merged across levels.
    enum SegmentInfo: Sendable {
        case template(attributes: [String: String], timeline: MPDElement?, initialization: MPDElement?)
        case list(attributes: [String: String], timeline: MPDElement?, initialization: MPDElement?, urls: [MPDElement])
        case base(attributes: [String: String], initialization: MPDElement?)
        /// No segment information: the `BaseURL` is the whole Representation (a subtitle file).
        case wholeFile
    }

    /// Interprets the MPD at `url`. Throws for a dynamic (live) MPD, remote (`xlink`) elements,
    /// URLs that are not http(s), and numbers out of range.
    init(root: MPDElement, url: URL) throws(MPDError) {
        self.root = root
        if let type = root.attributes["type"], type != "static" {
            throw MPDError("it is a \(type.prefix(40)) (live) presentation; only static (VOD) ones can be downloaded")
        }
        duration = try root.attributes["mediaPresentationDuration"].map { value throws(MPDError) in try MPDNumbers.duration(value, "mediaPresentationDuration") }
        let rootBase = try Self.base(of: root, against: url)
        let periodElements = root.children("Period")
        guard !periodElements.isEmpty else { throw MPDError("it has no Period") }
        var periods: [Period] = []
        for (index, element) in periodElements.enumerated() {
            guard element.attribute(localName: "href") == nil else { throw MPDError("Period \(index) is a remote (xlink) element") }
            let start: Double
            if let value = element.attributes["start"] {
                start = try MPDNumbers.duration(value, "Period@start")
            } else if let previous = periods.last {
                guard let previousDuration = previous.duration else { throw MPDError("Period \(index) has no start and the one before it no duration") }
                start = previous.start + previousDuration
            } else {
                start = 0
            }
            let own = try element.attributes["duration"].map { value throws(MPDError) in try MPDNumbers.duration(value, "Period@duration") }
            let base = try Self.base(of: element, against: rootBase)
            periods.append(Period(element: element, start: start, duration: own, adaptationSets: try Self.adaptationSets(of: element, base: base, period: index)))
        }
        // A Period without its own duration lasts until the next one starts, the last until the
        // presentation ends.
        for index in periods.indices where periods[index].duration == nil {
            let end = index + 1 < periods.count ? (periods[index + 1].element.attributes["start"] != nil ? periods[index + 1].start : nil) : duration
            if let end, end >= periods[index].start { periods[index].duration = end - periods[index].start }
        }
        self.periods = periods
    }

    private static func adaptationSets(of period: MPDElement, base: URL, period index: Int) throws(MPDError) -> [AdaptationSet] {
        var sets: [AdaptationSet] = []
        // Each level's segment elements are looked up once: a set of many Representations does
        // not scan its children again for each.
        let periodLevel = SegmentLevel(period)
        for element in period.children("AdaptationSet") {
            let setLevel = SegmentLevel(element)
            guard element.attribute(localName: "href") == nil else { throw MPDError("an AdaptationSet of Period \(index) is a remote (xlink) element") }
            let setBase = try Self.base(of: element, against: base)
            var representations: [Representation] = []
            for representation in element.children("Representation") {
                let id = representation.attributes["id"] ?? ""
                // Up to Int32.max: 2 Gbit/s is past any stream, and it fits `Int` on every platform.
                let bandwidth = try representation.attributes["bandwidth"].map { value throws(MPDError) in
                    try MPDNumbers.integer(value, "Representation@bandwidth", max: Int64(Int32.max))
                } ?? 0
                representations.append(Representation(
                    element: representation, id: id, bandwidth: Int(bandwidth), baseURL: try Self.base(of: representation, against: setBase),
                    segmentInfo: segmentInfo(levels: [periodLevel, setLevel, SegmentLevel(representation)])))
            }
            let trickPlay = element.children("EssentialProperty").contains { $0.attributes["schemeIdUri"] == "http://dashif.org/guidelines/trickmode" }
            sets.append(AdaptationSet(
                element: element, kind: kind(of: element), language: element.attributes["lang"] ?? element.children("Representation").lazy.compactMap { $0.attributes["lang"] }.first,
                isTrickPlay: trickPlay, representations: representations))
        }
        return sets
    }

    /// Video, audio or text by `contentType`, else by the MIME type of the set or its first
    /// Representation (`application/mp4` text tracks by their codecs, `stpp`, `wvtt`).
    static func kind(of set: MPDElement) -> AdaptationSet.Kind {
        let first = set.child("Representation")
        switch set.attributes["contentType"] {
        case "video": return .video
        case "audio": return .audio
        case "text": return .text
        case .some: return .other
        case nil: break
        }
        let mime = (set.attributes["mimeType"] ?? first?.attributes["mimeType"] ?? "").lowercased()
        let codecs = (set.attributes["codecs"] ?? first?.attributes["codecs"] ?? "").lowercased()
        if mime.hasPrefix("video/") { return .video }
        if mime.hasPrefix("audio/") { return .audio }
        if mime.hasPrefix("text/") || mime == "application/ttml+xml" { return .text }
        if mime == "application/mp4", codecs.hasPrefix("stpp") || codecs.hasPrefix("wvtt") { return .text }
        return .other
    }

    /// One level's segment elements (Period, AdaptationSet or Representation).
    struct SegmentLevel {
        var elements: [String: MPDElement] = [:]

        static let kinds = ["SegmentTemplate", "SegmentList", "SegmentBase"]

        init(_ element: MPDElement) {
            for child in element.children where Self.kinds.contains(child.name) && elements[child.name] == nil {
                elements[child.name] = child
            }
        }
    }

    /// The segment information of the lowest of `levels` that has any, its attributes merged
    /// over those of the same element higher up.
    static func segmentInfo(levels: [SegmentLevel]) -> SegmentInfo {
        // The kind at the lowest level wins (a Representation's own SegmentBase over its set's
        // SegmentTemplate); the same kind's elements above it give what it does not say.
        guard let lowest = levels.last(where: { !$0.elements.isEmpty }),
              let name = SegmentLevel.kinds.first(where: { lowest.elements[$0] != nil })
        else { return .wholeFile }
        let elements = levels.compactMap { $0.elements[name] }
        var attributes: [String: String] = [:]
        for element in elements { attributes.merge(element.attributes) { $1 } }
        let timeline = elements.last { $0.child("SegmentTimeline") != nil }?.child("SegmentTimeline")
        let initialization = elements.last { $0.child("Initialization") != nil }?.child("Initialization")
        switch name {
        case "SegmentTemplate": return .template(attributes: attributes, timeline: timeline, initialization: initialization)
        case "SegmentList":
            let urls = elements.last { !$0.children("SegmentURL").isEmpty }?.children("SegmentURL") ?? []
            return .list(attributes: attributes, timeline: timeline, initialization: initialization, urls: urls)
        default: return .base(attributes: attributes, initialization: initialization)
        }
    }

    /// The element's first `BaseURL` resolved against `base`, or `base`. Only http(s).
    static func base(of element: MPDElement, against base: URL) throws(MPDError) -> URL {
        guard let text = element.child("BaseURL")?.text, !text.isEmpty else { return base }
        return try resolve(text, against: base)
    }

    /// A URL of the MPD, relative or absolute; only http(s) with a host is downloaded.
    static func resolve(_ text: String, against base: URL) throws(MPDError) -> URL {
        guard text.utf8.count <= MPDDocument.maxURLLength else { throw MPDError("a URL is longer than \(MPDDocument.maxURLLength) bytes") }
        guard let url = URL(string: text, relativeTo: base)?.absoluteURL, let scheme = url.scheme?.lowercased(),
              scheme == "http" || scheme == "https", url.host?.isEmpty == false
        else {
            throw MPDError("\(text.prefix(200)) is not an http(s) URL")
        }
        return url
    }
}

/// Numbers of an MPD, each range-checked before use.
enum MPDNumbers {
    /// The longest time an MPD may state: a year, in seconds.
    static let maxSeconds: Double = 366 * 86_400

    /// An `xs:duration` as MPDs write it (`PT1H2M3.5S`, `P1DT2H`), in seconds. Years and months,
    /// which have no fixed length, are refused, as are negative and absurd values.
    static func duration(_ text: String, _ name: String) throws(MPDError) -> Double {
        var rest = Substring(text.trimmingCharacters(in: .whitespaces))
        guard rest.first == "P" else { throw MPDError("\(name) \"\(text.prefix(40))\" is not a duration") }
        rest = rest.dropFirst()
        var seconds = 0.0
        var inTime = false
        var any = false
        while !rest.isEmpty {
            if rest.first == "T" {
                guard !inTime else { throw MPDError("\(name) \"\(text.prefix(40))\" is not a duration") }
                inTime = true
                rest = rest.dropFirst()
                continue
            }
            let number = rest.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
            guard !number.isEmpty, number.count <= 20, let value = Double(number), value.isFinite else {
                throw MPDError("\(name) \"\(text.prefix(40))\" is not a duration")
            }
            rest = rest.dropFirst(number.count)
            guard let unit = rest.first else { throw MPDError("\(name) \"\(text.prefix(40))\" is not a duration") }
            rest = rest.dropFirst()
            let scale: Double
            switch (unit, inTime) {
            case ("D", false): scale = 86_400
            case ("H", true): scale = 3_600
            case ("M", true): scale = 60
            case ("S", true): scale = 1
            default: throw MPDError("\(name) \"\(text.prefix(40))\" is not a duration of days, hours, minutes and seconds")
            }
            seconds += value * scale
            any = true
        }
        guard any, seconds.isFinite, seconds <= maxSeconds else {
            throw MPDError("\(name) \"\(text.prefix(40))\" is not a duration up to a year")
        }
        return seconds
    }

    /// A non-negative decimal integer up to `max`.
    static func integer(_ text: String, _ name: String, max: Int64 = Int64(1) << 62) throws(MPDError) -> Int64 {
        guard let value = Int64(httpDecimal: text.trimmingCharacters(in: .whitespaces)), value <= max else {
            throw MPDError("\(name) \"\(text.prefix(40))\" is not an integer from 0 to \(max)")
        }
        return value
    }

    /// `first-last`, a byte range as `mediaRange`, `indexRange` and `Initialization@range` write it.
    static func byteRange(_ text: String, _ name: String) throws(MPDError) -> ByteRange {
        let parts = text.trimmingCharacters(in: .whitespaces).split(separator: "-", omittingEmptySubsequences: false)
        // Below 2^62, as every offset of the MPD: what follows a range (a sidx's anchor) cannot overflow.
        guard parts.count == 2, let first = Int64(httpDecimal: parts[0]), let last = Int64(httpDecimal: parts[1]), first <= last,
              last < Int64(1) << 62, let offset = Int(exactly: first), let length = Int(exactly: last - first + 1)
        else {
            throw MPDError("\(name) \"\(text.prefix(60))\" is not a byte range first-last below 2^62")
        }
        return ByteRange(length: length, offset: offset)
    }
}
