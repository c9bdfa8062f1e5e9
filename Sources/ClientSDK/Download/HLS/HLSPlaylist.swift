import Foundation

/// An HLS playlist (RFC 8216) as the download engine needs it: a master playlist's variants and
/// renditions, or a media playlist's segments with their byte ranges, init sections and keys.
/// URIs are resolved against the playlist's own URL. Tags the engine has no use for are skipped,
/// as the RFC asks of clients; what it cannot download correctly is refused with a clear error.
enum HLSPlaylist: Equatable, Sendable {
    case master(HLSMasterPlaylist)
    case media(HLSMediaPlaylist)

    /// Largest playlist read, in bytes: a VOD playlist of many hours is a few megabytes.
    static let maxBytes = 16 << 20

    /// Parses `data` fetched from `url`. A media playlist of more than `maxSegments` segments is
    /// refused as soon as the parser reaches the one too many, so that the segments a hostile
    /// playlist lists bound the memory it takes. Lines are read in place, never copied out.
    static func parse(_ data: Data, url: URL, maxSegments: Int = .max) throws(HLSPlaylistError) -> HLSPlaylist {
        guard data.count <= maxBytes else { throw .tooLarge(maxBytes) }
        guard let text = String(data: data, encoding: .utf8) else { throw .notAPlaylist("it is not UTF-8 text") }
        var lines = PlaylistLines(text)
        guard lines.next().map({ $0.hasPrefix("\u{FEFF}") ? $0.dropFirst() : $0 }) == "#EXTM3U" else {
            throw .notAPlaylist("it does not begin with #EXTM3U")
        }
        // Tags that appear only in master playlists.
        var isMaster = false
        var isMedia = false
        for line in lines where line.hasPrefix("#EXT") {
            if line.hasPrefix("#EXT-X-STREAM-INF:") || line.hasPrefix("#EXT-X-MEDIA:") { isMaster = true }
            if line.hasPrefix("#EXTINF") { isMedia = true }
            if isMaster && isMedia { break }
        }
        switch (isMaster, isMedia) {
        case (true, true): throw .malformed(line: nil, "it has both variant streams and media segments")
        case (true, false): return .master(try HLSMasterPlaylist(lines: lines, url: url))
        case (false, _): return .media(try HLSMediaPlaylist(lines: lines, url: url, maxSegments: maxSegments))
        }
    }
}

/// Why a playlist cannot be used. Each case is fatal for the asset: fetching it again would
/// give the same playlist.
enum HLSPlaylistError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not a playlist at all, e.g. an HTML page from a captive portal.
    case notAPlaylist(String)
    case malformed(line: String?, String)

    static func malformed(line: Substring, _ why: String) -> HLSPlaylistError { .malformed(line: String(line.prefix(120)), why) }
    case tooLarge(Int)
    /// More segments than the asset's budget allows (`DownloadOptions.maxSegmentsPerAsset`).
    case tooManySegments(Int)

    var description: String {
        switch self {
        case .notAPlaylist(let why): "Not an HLS playlist: \(why)."
        case .malformed(let line?, let why): "Malformed HLS playlist: \(why) (at \"\(line.prefix(120))\")."
        case .malformed(nil, let why): "Malformed HLS playlist: \(why)."
        case .tooLarge(let limit): "The HLS playlist is larger than \(limit) bytes."
        case .tooManySegments(let limit): "The asset's HLS playlists list more than \(limit) segments."
        }
    }
}

/// A master playlist: the variant streams and the alternative renditions they refer to.
struct HLSMasterPlaylist: Equatable, Sendable {
    struct Variant: Equatable, Sendable {
        var url: URL
        /// Peak bits per second (`BANDWIDTH`, required).
        var bandwidth: Int
        var averageBandwidth: Int?
        var codecs: String?
        var resolution: String?
        /// The `GROUP-ID`s of its audio and subtitle renditions.
        var audioGroup: String?
        var subtitlesGroup: String?
    }

    struct Rendition: Equatable, Sendable {
        enum Kind: String, Sendable { case audio = "AUDIO", video = "VIDEO", subtitles = "SUBTITLES", closedCaptions = "CLOSED-CAPTIONS" }
        var kind: Kind
        var groupId: String
        var name: String
        var language: String?
        /// Nil when the rendition is carried in the variant's own stream.
        var url: URL?
        var isDefault: Bool
    }

    var variants: [Variant]
    var renditions: [Rendition]

    fileprivate init(lines: PlaylistLines, url: URL) throws(HLSPlaylistError) {
        var variants: [Variant] = []
        var renditions: [Rendition] = []
        var pending: (line: Substring, attributes: HLSAttributes)?
        for line in lines {
            if line.hasPrefix("#EXT-X-STREAM-INF:") {
                guard pending == nil else { throw .malformed(line: line, "a variant stream has no URI") }
                pending = (line, try HLSAttributes(line, after: "#EXT-X-STREAM-INF:"))
            } else if line.hasPrefix("#EXT-X-MEDIA:") {
                let attributes = try HLSAttributes(line, after: "#EXT-X-MEDIA:")
                guard let kind = attributes.string("TYPE").flatMap(Rendition.Kind.init(rawValue:)) else {
                    throw .malformed(line: line, "a rendition has no valid TYPE")
                }
                guard let groupId = attributes.string("GROUP-ID"), let name = attributes.string("NAME") else {
                    throw .malformed(line: line, "a rendition needs GROUP-ID and NAME")
                }
                renditions.append(Rendition(
                    kind: kind, groupId: groupId, name: name, language: attributes.string("LANGUAGE"),
                    url: try attributes.string("URI").map { uri throws(HLSPlaylistError) in try resolve(uri, against: url, line: line) },
                    isDefault: attributes.string("DEFAULT") == "YES"))
            } else if line.hasPrefix("#") {
                continue
            } else if let (streamLine, attributes) = pending.map({ ($0.line, $0.attributes) }) {
                guard let bandwidth = try attributes.integer("BANDWIDTH", line: streamLine) else {
                    throw .malformed(line: streamLine, "a variant stream has no BANDWIDTH")
                }
                variants.append(Variant(
                    url: try resolve(String(line), against: url, line: line), bandwidth: bandwidth,
                    averageBandwidth: try attributes.integer("AVERAGE-BANDWIDTH", line: streamLine),
                    codecs: attributes.string("CODECS"), resolution: attributes.string("RESOLUTION"),
                    audioGroup: attributes.string("AUDIO"), subtitlesGroup: attributes.string("SUBTITLES")))
                pending = nil
            } else {
                throw .malformed(line: line, "a URI that no tag describes")
            }
        }
        if let pending { throw .malformed(line: pending.line, "a variant stream has no URI") }
        guard !variants.isEmpty else { throw .malformed(line: nil, "a master playlist without variants") }
        self.variants = variants
        self.renditions = renditions
    }

    /// The variant to download under a bit-rate limit, by `BANDWIDTH` (`BitrateChoice`).
    func variant(maxBitrate: Int?) -> Variant {
        // The parser refuses a master playlist without variants.
        BitrateChoice.choose(variants, maxBitrate: maxBitrate, bandwidth: \.bandwidth)!
    }

    /// The renditions of `kind` in `group` with one of `languages` (nil: every language; empty:
    /// none), in playlist order. Languages match as `LanguageCodes.matches` says (`fr` takes
    /// `fr-FR`, `fra` and `fre`).
    func renditions(_ kind: Rendition.Kind, group: String?, languages: [String]?) -> [Rendition] {
        guard let group else { return [] }
        return renditions.filter { rendition in
            guard rendition.kind == kind, rendition.groupId == group else { return false }
            guard let languages else { return true }
            guard let language = rendition.language else { return false }
            return LanguageCodes.matches(language, anyOf: languages)
        }
    }
}

/// A media playlist: the segments of one rendition, in order.
struct HLSMediaPlaylist: Equatable, Sendable {
    struct Key: Hashable, Sendable {
        enum Method: Hashable, Sendable {
            case none, aes128, sampleAES, other(String)
        }
        var method: Method
        /// Where the key is: an http(s) URL for the identity format, any URI for others.
        var url: URL?
        var iv: String?
        /// `KEYFORMAT`; nil is "identity", the key file itself.
        var format: String?
        /// The URI as the playlist wrote it, kept in the local playlist when the key is not a
        /// file the SDK downloads (`skd://…`, a `data:` URI).
        var uri: String = ""
        /// The key id a `data:` URI carries (16 bytes): Shaka Packager writes cbcs HLS keys as
        /// `data:text/plain;base64,<key id>` in the identity format. What a license is asked for.
        var keyId: Data? = nil
        /// A key the SDK downloads with the segments: AES-128 (or SAMPLE-AES) in the identity
        /// format. Any other format belongs to the app's license provider.
        var isDownloadable: Bool {
            method != .none && (format == nil || format == "identity") && url != nil && keyId == nil
        }
    }

    /// `EXT-X-MAP`: the media initialization section of the segments after it.
    struct InitSection: Hashable, Sendable {
        var url: URL
        var byteRange: ByteRange?
        /// The key in effect where the tag stands: an `EXT-X-KEY` before the map encrypts the
        /// section, one after it only the segments (RFC 8216 §4.3.2.4, §4.3.2.5).
        var key: Key? = nil
    }

    struct Segment: Equatable, Sendable {
        var url: URL
        var duration: Double
        var byteRange: ByteRange?
        var key: Key?
        var initSection: InitSection?
        /// Media sequence number.
        var sequence: Int
        /// An `EXT-X-DISCONTINUITY` stands before it: its encoding or timeline differs from the
        /// segment before (an ad stitched in, another source); players reset their decoders.
        var discontinuity = false
    }

    var targetDuration: Int
    var mediaSequence: Int
    /// `EXT-X-DISCONTINUITY-SEQUENCE`: discontinuities before the first segment listed.
    var discontinuitySequence = 0
    var segments: [Segment]
    /// `#EXT-X-ENDLIST` was present: no segment will be added (VOD, or a finished event).
    var isComplete: Bool

    /// The playlist's total duration, in seconds.
    var duration: Double { segments.reduce(0) { $0 + $1.duration } }

    fileprivate init(lines: PlaylistLines, url: URL, maxSegments: Int) throws(HLSPlaylistError) {
        var targetDuration: Int?
        var mediaSequence = 0
        var segments: [Segment] = []
        var isComplete = false
        var discontinuitySequence = 0
        var discontinuity = false
        var duration: Double?
        var byteRange: (length: Int, offset: Int?)?
        var key: Key?
        var initSection: InitSection?
        // Where the previous segment's sub-range ended, in which resource: an implicit offset
        // continues from there and is malformed anywhere else.
        var previousRangeEnd: (url: URL, end: Int)?
        for line in lines {
            if line.hasPrefix("#EXTINF:") {
                let value = line.dropFirst("#EXTINF:".count).split(separator: ",", maxSplits: 1).first.map(String.init) ?? ""
                guard let seconds = Double(value.trimmingCharacters(in: .whitespaces)), seconds.isFinite, seconds >= 0, seconds <= 86_400 else {
                    throw .malformed(line: line, "a segment duration that is not a number of seconds")
                }
                duration = seconds
            } else if line.hasPrefix("#EXT-X-TARGETDURATION:") {
                targetDuration = try Self.integer(line, after: "#EXT-X-TARGETDURATION:")
            } else if line.hasPrefix("#EXT-X-MEDIA-SEQUENCE:") {
                mediaSequence = try Self.integer(line, after: "#EXT-X-MEDIA-SEQUENCE:")
            } else if line.hasPrefix("#EXT-X-BYTERANGE:") {
                byteRange = try Self.byteRange(line.dropFirst("#EXT-X-BYTERANGE:".count), line: line)
            } else if line.hasPrefix("#EXT-X-KEY:") {
                key = try Self.key(line, url: url)
            } else if line.hasPrefix("#EXT-X-MAP:") {
                let attributes = try HLSAttributes(line, after: "#EXT-X-MAP:")
                guard let uri = attributes.string("URI") else { throw .malformed(line: line, "EXT-X-MAP without URI") }
                let range = try attributes.string("BYTERANGE").map { value throws(HLSPlaylistError) in try Self.byteRange(value, line: line) }
                initSection = InitSection(
                    url: try resolve(uri, against: url, line: line),
                    byteRange: range.map { ByteRange(length: $0.length, offset: $0.offset ?? 0) }, key: key)
            } else if line == "#EXT-X-DISCONTINUITY" {
                discontinuity = true
            } else if line.hasPrefix("#EXT-X-DISCONTINUITY-SEQUENCE:") {
                discontinuitySequence = try Self.integer(line, after: "#EXT-X-DISCONTINUITY-SEQUENCE:")
            } else if line == "#EXT-X-ENDLIST" {
                isComplete = true
            } else if line.hasPrefix("#") {
                continue
            } else {
                guard let segmentDuration = duration else { throw .malformed(line: line, "a URI without #EXTINF") }
                guard segments.count < maxSegments else { throw .tooManySegments(maxSegments) }
                // Checked, as every number from the playlist: a sequence near Int.max must
                // fail the playlist, not trap.
                let (sequence, overflow) = mediaSequence.addingReportingOverflow(segments.count)
                guard !overflow else { throw .malformed(line: line, "media sequence numbers past 2^63") }
                let segmentURL = try resolve(String(line), against: url, line: line)
                var range: ByteRange?
                if let byteRange {
                    let offset: Int
                    if let explicit = byteRange.offset {
                        offset = explicit
                    } else if let previous = previousRangeEnd, previous.url == segmentURL {
                        offset = previous.end
                    } else {
                        throw .malformed(line: line, "a byte range without offset that does not follow one in the same file")
                    }
                    // An implicit offset continues the previous range: where it ends must still be
                    // an offset (the explicit form is checked as it is read).
                    let (end, overflow) = offset.addingReportingOverflow(byteRange.length)
                    guard !overflow else { throw .malformed(line: line, "a byte range that ends past what a 64-bit offset can address") }
                    range = ByteRange(length: byteRange.length, offset: offset)
                    previousRangeEnd = (segmentURL, end)
                } else {
                    previousRangeEnd = nil
                }
                segments.append(Segment(
                    url: segmentURL, duration: segmentDuration, byteRange: range, key: key, initSection: initSection,
                    sequence: sequence, discontinuity: discontinuity))
                duration = nil
                byteRange = nil
                discontinuity = false
            }
        }
        guard let targetDuration else { throw .malformed(line: nil, "a media playlist without #EXT-X-TARGETDURATION") }
        guard duration == nil else { throw .malformed(line: nil, "the last #EXTINF has no URI") }
        self.targetDuration = targetDuration
        self.mediaSequence = mediaSequence
        self.discontinuitySequence = discontinuitySequence
        self.segments = segments
        self.isComplete = isComplete
    }

    private static func integer(_ line: Substring, after tag: String) throws(HLSPlaylistError) -> Int {
        guard let value = Int(decimalInteger: line.dropFirst(tag.count)) else {
            throw .malformed(line: line, "\(tag.dropLast()) is not a non-negative integer")
        }
        return value
    }

    /// `n[@o]`, both decimal integers, the range inside what a 64-bit offset can address.
    private static func byteRange(_ value: some StringProtocol, line: Substring) throws(HLSPlaylistError) -> (length: Int, offset: Int?) {
        let parts = value.split(separator: "@", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let length = Int(decimalInteger: parts[0]), length > 0 else {
            throw .malformed(line: line, "a byte range that is not length[@offset]")
        }
        guard parts.count == 2 else { return (length, nil) }
        guard let offset = Int(decimalInteger: parts[1]), offset <= Int.max - length else {
            throw .malformed(line: line, "a byte range offset that is not a non-negative integer")
        }
        return (length, offset)
    }

    private static func key(_ line: Substring, url: URL) throws(HLSPlaylistError) -> Key? {
        let attributes = try HLSAttributes(line, after: "#EXT-X-KEY:")
        let method: Key.Method = switch attributes.string("METHOD") {
        case "NONE": .none
        case "AES-128": .aes128
        case "SAMPLE-AES": .sampleAES
        case let other?: .other(other)
        case nil: throw .malformed(line: line, "EXT-X-KEY without METHOD")
        }
        if method == .none { return nil }
        guard let uri = attributes.string("URI") else { throw .malformed(line: line, "an encryption key without URI") }
        let format = attributes.string("KEYFORMAT")
        // A `data:` URI carries the key's id, not the key: the license provider's (any format).
        if uri.utf8.count <= 1024, uri.lowercased().hasPrefix("data:") {
            guard let keyId = dataURIKeyId(uri) else {
                throw .malformed(line: line, "a data: key URI that is not a base64 key id of 16 bytes")
            }
            return Key(method: method, url: nil, iv: attributes.string("IV"), format: format, uri: uri, keyId: keyId)
        }
        // A key in the identity format is a file the SDK downloads; any other format (FairPlay's
        // skd://, Widevine, …) is the license provider's, whatever its URI scheme.
        let keyURL = format == nil || format == "identity"
            ? try resolve(uri, against: url, line: line)
            : URL(string: uri, relativeTo: url)?.absoluteURL
        return Key(method: method, url: keyURL, iv: attributes.string("IV"), format: format, uri: uri)
    }

    /// `data:[<type>];base64,<16 bytes>` (RFC 2397), the key id Shaka Packager writes.
    static func dataURIKeyId(_ uri: String) -> Data? {
        guard let comma = uri.firstIndex(of: ","), uri[..<comma].lowercased().hasSuffix(";base64"),
              let bytes = Data(base64Encoded: String(uri[uri.index(after: comma)...])), bytes.count == 16
        else { return nil }
        return bytes
    }
}

/// A playlist URI, relative to the playlist or absolute; only http(s) is downloaded.
private func resolve(_ uri: String, against base: URL, line: Substring) throws(HLSPlaylistError) -> URL {
    guard let url = URL(string: uri, relativeTo: base)?.absoluteURL, let scheme = url.scheme?.lowercased(),
        scheme == "http" || scheme == "https", url.host != nil
    else {
        throw .malformed(line: line, "a URI that is not http(s)")
    }
    return url
}
