import Foundation

/// A Smooth Streaming client manifest ([MS-SSTR] §2.2.2), read from XML by `MPDDocument` under
/// the same limits as an MPD (no document type declaration, so no entities; bounded size,
/// elements, depth and text). Its streams (`StreamIndex`), each with its quality levels
/// (`QualityLevel`) and its fragments (`c` with `t`, `d` and `r`, where `r` counts the fragment
/// and its repeats, 1 by default, as Media3 reads it), and the DRM headers (`Protection`).
/// Only VOD: a manifest with `IsLive="TRUE"` is refused.
struct SmoothManifest: Sendable {
    struct Stream: Sendable {
        typealias Kind = TrackKind
        var element: MPDElement
        var kind: Kind
        var language: String?
        /// `Url`: where a fragment is, with `{bitrate}` and `{start time}` (or `{start_time}`) to fill.
        var urlTemplate: String
        /// Ticks per second of the fragments' times.
        var timescale: Int64
        var qualityLevels: [QualityLevel]
        var fragments: [Fragment]
    }

    struct QualityLevel: Sendable {
        var element: MPDElement
        var bitrate: Int
        /// `CustomAttributes`, as `{CustomAttributes}` in a template names them (`Name=Value,…`).
        var customAttributes: String?
    }

    /// A fragment's start and duration, in its stream's timescale.
    struct Fragment: Sendable, Equatable {
        var time: Int64
        var duration: Int64
    }

    /// Largest manifest read, as for an MPD.
    static let maxBytes = MPDDocument.maxBytes
    /// The root's and every stream's default timescale: 100 ns ticks.
    static let defaultTimescale: Int64 = 10_000_000

    var root: MPDElement
    /// The presentation's length, in the root's timescale (`Duration`), when it says.
    var duration: Int64?
    var timescale: Int64
    var streams: [Stream]
    /// Each `ProtectionHeader`, for the app's license provider (`SmoothProtection`).
    var protection: [ContentProtection]

    /// `root` read; at most `maxFragments` fragments over every stream.
    init(root: MPDElement, maxFragments: Int) throws(SmoothManifestError) {
        guard root.name == "SmoothStreamingMedia" else {
            throw SmoothManifestError("its root element is \(root.qualifiedName.prefix(80)), not SmoothStreamingMedia")
        }
        if root.attributes["IsLive"]?.uppercased() == "TRUE" {
            throw SmoothManifestError("it is a live manifest (IsLive); only VOD can be downloaded")
        }
        self.root = root
        timescale = try Self.timescale(root.attributes["TimeScale"], default: Self.defaultTimescale)
        duration = try root.attributes["Duration"].map { value throws(SmoothManifestError) in try Self.integer(value, "Duration") }
        var fragmentsLeft = maxFragments
        var streams: [Stream] = []
        for element in root.children("StreamIndex") {
            let stream = try Self.stream(element, timescale: timescale, duration: duration, fragmentsLeft: &fragmentsLeft)
            streams.append(stream)
        }
        guard !streams.isEmpty else { throw SmoothManifestError("it has no StreamIndex") }
        self.streams = streams
        // Each header once (a PlayReady one is read as XML of its own), as many as DASH gives.
        var seen: Set<[String]> = []
        var protection: [ContentProtection] = []
        for header in root.children("Protection").lazy.flatMap({ $0.children("ProtectionHeader") }) {
            guard seen.insert([header.attributes["SystemID"] ?? "", header.text]).inserted else { continue }
            protection.append(SmoothProtection.contentProtection(header))
            if protection.count == ContentProtection.maxPerAsset { break }
        }
        self.protection = ContentProtection.each(protection)
    }

    private static func stream(
        _ element: MPDElement, timescale rootTimescale: Int64, duration: Int64?, fragmentsLeft: inout Int
    ) throws(SmoothManifestError) -> Stream {
        let kind: Stream.Kind = switch element.attributes["Type"]?.lowercased() {
        case "video": .video
        case "audio": .audio
        case "text": .text
        default: .other
        }
        guard let template = element.attributes["Url"], !template.isEmpty else { throw SmoothManifestError("a StreamIndex has no Url") }
        // Expanded once per fragment: its length is bounded as a URL's, not as an attribute's.
        guard template.utf8.count <= MPDDocument.maxURLLength else {
            throw SmoothManifestError("a StreamIndex Url is longer than \(MPDDocument.maxURLLength) bytes")
        }
        guard template.contains("{start time}") || template.contains("{start_time}") else {
            throw SmoothManifestError("the Url \(template.prefix(120)) has no {start time}")
        }
        let timescale = try Self.timescale(element.attributes["TimeScale"], default: rootTimescale)
        var levels: [QualityLevel] = []
        for level in element.children("QualityLevel") {
            guard let text = level.attributes["Bitrate"], let bitrate = Int(exactly: try integer(text, "Bitrate", max: Int64(Int32.max))) else {
                throw SmoothManifestError("a QualityLevel has no Bitrate")
            }
            let custom = level.child("CustomAttributes")?.children("Attribute").compactMap { attribute -> String? in
                guard let name = attribute.attributes["Name"], let value = attribute.attributes["Value"] else { return nil }
                return "\(name)=\(value)"
            }
            levels.append(QualityLevel(element: level, bitrate: bitrate, customAttributes: custom.flatMap { $0.isEmpty ? nil : $0.joined(separator: ",") }))
        }
        guard !levels.isEmpty else { throw SmoothManifestError("a StreamIndex has no QualityLevel") }
        // The presentation's end in this stream's timescale, for a last fragment without `d`.
        let end = duration.flatMap { Int64(exactly: (Double($0) * Double(timescale) / Double(rootTimescale)).rounded()) }
        let fragments = try Self.fragments(element.children("c"), end: end, fragmentsLeft: &fragmentsLeft)
        guard !fragments.isEmpty else { throw SmoothManifestError("a StreamIndex has no fragments") }
        return Stream(
            element: element, kind: kind, language: element.attributes["Language"], urlTemplate: template, timescale: timescale,
            qualityLevels: levels, fragments: fragments)
    }

    /// The fragments the `c` elements list: a missing `t` follows the last fragment (0 for the
    /// first), a missing `d` lasts to the next element's `t` (the presentation's end for the
    /// last element), and `r` counts the fragment and its repeats (only with a `d`, as Media3
    /// has it). Times only go forward, and never overflow.
    private static func fragments(_ elements: [MPDElement], end: Int64?, fragmentsLeft: inout Int) throws(SmoothManifestError) -> [Fragment] {
        var fragments: [Fragment] = []
        var next: Int64 = 0
        for (index, element) in elements.enumerated() {
            let time = try element.attributes["t"].map { value throws(SmoothManifestError) in try integer(value, "c@t") } ?? next
            guard time >= next || fragments.isEmpty else { throw SmoothManifestError("a fragment starts at \(time), before the last one ends") }
            let stated = try element.attributes["d"].map { value throws(SmoothManifestError) in try integer(value, "c@d") }
            var duration = stated
            if duration == nil {
                if index + 1 < elements.count {
                    if let following = elements[index + 1].attributes["t"] { duration = try integer(following, "c@t") - time }
                } else if let end {
                    duration = end - time
                }
            }
            guard let duration, duration > 0 else { throw SmoothManifestError("a fragment at \(time) has no duration") }
            let repeats = try element.attributes["r"].map { value throws(SmoothManifestError) in try integer(value, "c@r", max: Int64(Int32.max)) } ?? 1
            guard repeats >= 1 else { throw SmoothManifestError("c@r is 0") }
            guard repeats == 1 || stated != nil else { throw SmoothManifestError("a repeated fragment at \(time) has no d") }
            guard repeats <= fragmentsLeft else { throw SmoothManifestError("more fragments than the asset's budget (\(fragmentsLeft) left)") }
            fragmentsLeft -= Int(repeats)
            var start = time
            for _ in 0..<repeats {
                fragments.append(Fragment(time: start, duration: duration))
                let (after, overflow) = start.addingReportingOverflow(duration)
                guard !overflow, after < Int64(1) << 62 else { throw SmoothManifestError("a fragment's time passes 2^62") }
                start = after
            }
            next = start
        }
        return fragments
    }

    private static func timescale(_ text: String?, default fallback: Int64) throws(SmoothManifestError) -> Int64 {
        guard let text else { return fallback }
        let value = try integer(text, "TimeScale", max: Int64(UInt32.max))
        guard value > 0 else { throw SmoothManifestError("TimeScale is 0") }
        return value
    }

    private static func integer(_ text: String, _ name: String, max: Int64 = Int64(1) << 62) throws(SmoothManifestError) -> Int64 {
        do {
            return try MPDNumbers.integer(text, name, max: max)
        } catch {
            throw SmoothManifestError(error.message)
        }
    }
}

/// Why a Smooth Streaming manifest cannot be used. Each is fatal for the asset.
struct SmoothManifestError: Error, Equatable, Sendable, CustomStringConvertible {
    var message: String
    init(_ message: String) { self.message = message }
    var description: String { "Unusable Smooth Streaming manifest: \(message)." }
}
