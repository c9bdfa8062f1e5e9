/// A size a file's format fixes or bounds, checked by `FileFetcher` against what the origin
/// declares and what it sends: an answer that breaks it fails the asset (`.origin`, fatal: the
/// same origin would answer the same again), and its body is read no further than one byte past
/// the most the rule allows, so an answer of a gigabyte costs a few bytes of reading and none of
/// storage. Playlists, MPDs and `sidx` boxes have their own bounds (`ManifestFetcher`);
/// segments and flat files are bounded by the storage rules only, as their size is the media's.
enum FileSizeRule: Sendable, Equatable, Codable {
    /// Exactly this many bytes.
    case exactly(Int64)
    /// At most this many bytes.
    case atMost(Int64)

    /// An AES-128 key (HLS `METHOD=AES-128` or `SAMPLE-AES`, `KEYFORMAT` identity): 16 bytes,
    /// RFC 8216 §5.2.
    static let aes128Key = FileSizeRule.exactly(16)

    /// A key of a method the SDK does not know, in the identity format: bounded as a key is
    /// (the AES family's keys are 16 to 32 bytes), not fixed.
    static let otherKey = FileSizeRule.atMost(1024)

    /// The rule for an HLS key file of `method`.
    static func key(_ method: HLSMediaPlaylist.Key.Method) -> FileSizeRule {
        switch method {
        case .aes128, .sampleAES: aes128Key
        case .none, .other: otherKey
        }
    }

    /// An initialization section (HLS `EXT-X-MAP`, DASH `Initialization`): a fragmented MP4's
    /// `ftyp` and `moov` without samples, or a transport stream's PAT and PMT, from a few hundred
    /// bytes to some tens of KiB with many DRM systems' `pssh` boxes. 8 MiB is far past any real
    /// one and still a bounded write.
    static let initSection = FileSizeRule.atMost(8 << 20)

    /// The most bytes the rule allows.
    var most: Int64 {
        switch self {
        case .exactly(let bytes), .atMost(let bytes): bytes
        }
    }

    /// Whether a file of `bytes` bytes keeps the rule.
    func allows(_ bytes: Int64) -> Bool {
        switch self {
        case .exactly(let size): bytes == size
        case .atMost(let most): bytes <= most
        }
    }

    /// The rule in words, for a failure's message.
    var text: String {
        switch self {
        case .exactly(let bytes): "exactly \(bytes) bytes"
        case .atMost(let bytes): "at most \(bytes) bytes"
        }
    }
}
