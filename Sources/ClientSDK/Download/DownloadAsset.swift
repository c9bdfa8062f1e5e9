import Foundation
import BackplaneWire

/// What the app asks the SDK to download: `engine.downloads.enqueue(_:)`.
public struct DownloadRequest: Sendable, Equatable, Codable {
    public struct Kind: WireVocabulary {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// One file (an MP4, …), fetched as a single resumable download.
        public static let file = Kind(rawValue: "file")
        /// An HLS VOD asset: the URL is a master or a media playlist.
        public static let hls = Kind(rawValue: "hls")
        /// A DASH VOD asset: the URL is a static MPD.
        public static let dash = Kind(rawValue: "dash")
        /// A Smooth Streaming VOD asset: the URL is its client manifest (`…/Manifest`).
        public static let smooth = Kind(rawValue: "smooth")
        public static let allCases: [Kind] = [.file, .hls, .dash, .smooth]
    }

    /// The app's id of the asset (the CMS's): 1 to `WireLimits.maxIdentifierLength` bytes.
    public var assetId: String
    /// http or https.
    public var url: URL
    public var kind: Kind
    /// `Content-Type`s a file of this asset may have (lowercase, without parameters); an answer
    /// of another type fails the asset at once and stores nothing, so a captive portal's HTML
    /// page is never kept as video. Nil accepts any type. Playlists are always checked as such.
    public var allowedMIMETypes: Set<String>?
    /// HLS and DASH: the video stream's bit-rate limit (a variant's `BANDWIDTH`, a
    /// Representation's `@bandwidth`): the highest not above it, the lowest when none is; 0 picks
    /// the lowest, nil the highest.
    public var maxVideoBitrate: Int?
    /// HLS audio renditions and DASH audio AdaptationSets to download, by language (nil: all;
    /// empty: none). A language matches in any form manifests write it: `fr` finds `fr`,
    /// `fr-FR`, `fra` and `fre`.
    public var audioLanguages: [String]?
    /// HLS subtitle renditions and DASH text AdaptationSets to download, by language (nil: all;
    /// empty: none), matched as `audioLanguages` are.
    public var subtitleLanguages: [String]?
    /// Files that travel with the title (artwork, thumbnails, a sidecar), each with a tag
    /// (`AncillaryFile`); at most `AncillaryFile.maxPerAsset`.
    public var ancillaries: [AncillaryFile] = []
    /// The app's own data, kept with the asset.
    public var metadata: [String: String]
    /// The size the catalogue declares (an episode's `sizeBytes`), when it does. A download that
    /// completes at another size (a flat file by any byte, HLS and DASH by more than 10 %) completes with
    /// a `downloadWarning`: the catalogue or the origin is out of step.
    public var declaredSize: Int64?
    /// When the asset may be played, over the application's settings (an episode's values for
    /// subscription items, kept up to date as the CMS changes them). A window the backplane
    /// granted lies under these.
    public var availability: AssetAvailability?
    /// Downloads of this asset the app allows one account over its lifetime, sent with the
    /// permission request: it can only tighten the backplane's limit (nil: the backplane's).
    public var maxLifetimeDownloads: Int?
    /// HLS, DASH and Smooth Streaming: only this part of the title (`MediaTimeRange`); nil: all of it.
    public var timeRange: MediaTimeRange?

    public init(
        assetId: String, url: URL, kind: Kind = .file, allowedMIMETypes: Set<String>? = nil, maxVideoBitrate: Int? = nil,
        audioLanguages: [String]? = nil, subtitleLanguages: [String]? = nil, metadata: [String: String] = [:],
        declaredSize: Int64? = nil, availability: AssetAvailability? = nil, maxLifetimeDownloads: Int? = nil,
        ancillaries: [AncillaryFile] = [], timeRange: MediaTimeRange? = nil
    ) {
        self.timeRange = timeRange
        self.ancillaries = ancillaries
        self.maxLifetimeDownloads = maxLifetimeDownloads
        self.availability = availability
        self.assetId = assetId
        self.url = url
        self.kind = kind
        self.allowedMIMETypes = allowedMIMETypes
        self.maxVideoBitrate = maxVideoBitrate
        self.audioLanguages = audioLanguages
        self.subtitleLanguages = subtitleLanguages
        self.metadata = metadata
        self.declaredSize = declaredSize
    }

    private enum CodingKeys: String, CodingKey {
        case assetId, url, kind, allowedMIMETypes, maxVideoBitrate, audioLanguages, subtitleLanguages, ancillaries, metadata, declaredSize,
             availability, maxLifetimeDownloads, timeRange
    }

    /// Requests kept by earlier versions (in the SDK database) have no ancillary files and no time range.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        assetId = try container.decode(String.self, forKey: .assetId)
        url = try container.decode(URL.self, forKey: .url)
        kind = try container.decode(Kind.self, forKey: .kind)
        allowedMIMETypes = try container.decodeIfPresent(Set<String>.self, forKey: .allowedMIMETypes)
        maxVideoBitrate = try container.decodeIfPresent(Int.self, forKey: .maxVideoBitrate)
        audioLanguages = try container.decodeIfPresent([String].self, forKey: .audioLanguages)
        subtitleLanguages = try container.decodeIfPresent([String].self, forKey: .subtitleLanguages)
        ancillaries = try container.decodeIfPresent([AncillaryFile].self, forKey: .ancillaries) ?? []
        metadata = try container.decode([String: String].self, forKey: .metadata)
        declaredSize = try container.decodeIfPresent(Int64.self, forKey: .declaredSize)
        availability = try container.decodeIfPresent(AssetAvailability.self, forKey: .availability)
        maxLifetimeDownloads = try container.decodeIfPresent(Int.self, forKey: .maxLifetimeDownloads)
        timeRange = try container.decodeIfPresent(MediaTimeRange.self, forKey: .timeRange)
    }

    /// Largest `metadata` accepted, in bytes of its keys and values.
    public static let maxMetadataBytes = 16 * 1024

    /// How far the completed size of `kind` may be from `declaredSize` without a warning.
    func sizeMismatch(completedSize: Int64) -> String? {
        guard let declaredSize else { return nil }
        let tolerance = kind == .file ? 0 : Double(declaredSize) * 0.1
        guard abs(Double(completedSize - declaredSize)) > tolerance else { return nil }
        return "Completed at \(completedSize) bytes; the catalogue declares \(declaredSize)."
    }

    /// Why the SDK would refuse this request, or nil.
    var problem: String? {
        if assetId.isEmpty { return "The asset id is empty." }
        if assetId.utf8.count > WireLimits.maxIdentifierLength {
            return "The asset id is longer than \(WireLimits.maxIdentifierLength) bytes."
        }
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host?.isEmpty == false else {
            return "The asset URL \(url.absoluteString.prefix(200)) is not an http(s) URL."
        }
        guard kind.isKnown else { return "This SDK does not download assets of kind '\(kind)'." }
        if let maxVideoBitrate, maxVideoBitrate < 0 { return "maxVideoBitrate must not be negative." }
        if let declaredSize, declaredSize < 0 { return "declaredSize must not be negative." }
        if let problem = availability?.problem { return problem.message }
        let limit = DownloadPermissionRequest.maxLifetimeDownloadsLimit
        if let maxLifetimeDownloads, !(0...limit).contains(maxLifetimeDownloads) {
            return "maxLifetimeDownloads must be 0 to \(limit)."
        }
        if let problem = AncillaryFile.problem(ancillaries) { return problem }
        if let timeRange {
            if let problem = timeRange.problem { return problem }
            if kind == .file { return "A time range needs an HLS, DASH or Smooth Streaming asset: a flat file is downloaded whole." }
        }
        if metadata.reduce(0, { $0 + $1.key.utf8.count + $1.value.utf8.count }) > Self.maxMetadataBytes {
            return "The asset's metadata is larger than \(Self.maxMetadataBytes) bytes."
        }
        return nil
    }
}

/// Why downloads wait although the queue holds work. Each clears by itself when its cause does:
/// the engine looks again when it changes (or, for storage, every `DownloadOptions.storageRecheck`).
public struct DownloadBlock: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The app turned downloads off (`engine.downloads.setEnabled(false)`).
    public static let switchedOff = DownloadBlock(rawValue: "switchedOff")
    /// The backplane has not enabled this device for download (device limit), or has not said yet.
    public static let deviceNotDownloadEnabled = DownloadBlock(rawValue: "deviceNotDownloadEnabled")
    /// No network.
    public static let networkUnavailable = DownloadBlock(rawValue: "networkUnavailable")
    /// Only an expensive (cellular) network, and `downloadOverCellular` is off.
    public static let cellularNotAllowed = DownloadBlock(rawValue: "cellularNotAllowed")
    /// `DownloadConditions.requiresUnmeteredNetwork`, and the network is metered or expensive.
    public static let meteredNetwork = DownloadBlock(rawValue: "meteredNetwork")
    /// `DownloadConditions.requiresCharging`, and the device is off its charger.
    public static let charging = DownloadBlock(rawValue: "charging")
    /// Off its charger, the battery is below `DownloadConditions.minimumBatteryLevel`.
    public static let battery = DownloadBlock(rawValue: "battery")
    /// `maxStorage` or `headroom` leaves no room for the next file.
    public static let storage = DownloadBlock(rawValue: "storage")
    /// `maxDownloadedAssets` completed assets are on the device.
    public static let maxDownloadedAssets = DownloadBlock(rawValue: "maxDownloadedAssets")
    /// The application's `maxDownloadsPerDevice` completed assets are on the device.
    public static let maxDownloadsPerDevice = DownloadBlock(rawValue: "maxDownloadsPerDevice")
    /// This asset only: the backplane denied its download by a rule that can change (see
    /// `DownloadAsset.permission`); it is asked again after the next sync or retry pass.
    public static let permissionDenied = DownloadBlock(rawValue: "permissionDenied")
    public static let allCases: [DownloadBlock] = [
        .switchedOff, .deviceNotDownloadEnabled, .networkUnavailable, .cellularNotAllowed, .meteredNetwork, .charging, .battery, .storage, .maxDownloadedAssets,
        .maxDownloadsPerDevice, .permissionDenied,
    ]
}

/// Where an asset is.
public enum DownloadState: Sendable, Equatable {
    /// Waiting for its turn.
    case pending
    case downloading
    /// Paused by the app; it keeps its place and its partial files.
    case paused
    /// On the device, whole.
    case completed
    /// It will not be tried again until the app clears its retries (or, for a fatal failure,
    /// until it is fixed at the origin and the retries are cleared).
    case failed(DownloadFailure)
    /// It would be downloading but a rule stops it.
    case blocked(DownloadBlock)

    /// A stable name, e.g. for the harness.
    public var name: String {
        switch self {
        case .pending: "pending"
        case .downloading: "downloading"
        case .paused: "paused"
        case .completed: "completed"
        case .failed: "failed"
        case .blocked: "blocked"
        }
    }
}

/// An asset the download engine holds: queued, in progress, failed or completed.
public struct DownloadAsset: Sendable, Equatable {
    public var request: DownloadRequest
    public var assetId: String { request.assetId }
    public var state: DownloadState
    /// Bytes on the device so far (all files of the asset).
    public var bytesDownloaded: Int64
    /// The asset's size once known; for HLS an estimate (bandwidth × duration) until every
    /// file's size is known. Nil before the first answer.
    public var expectedBytes: Int64?
    public var expectedBytesIsEstimate: Bool
    /// Passes through the queue that ended in an error for this asset (rule of threes: three
    /// make it `failed`).
    public var errorCount: Int
    /// The last failure, also while it is retried.
    public var lastFailure: DownloadFailure?
    /// Its place in the queue (0 first); nil once completed.
    public var position: Int?
    public var addedAt: Date
    public var completedAt: Date?
    /// What the backplane said of its download.
    public var permission: DownloadPermissionStatus = .notAsked
    /// Completed: what to play, under the data directory (the flat file or the local master
    /// playlist, which refers only to local files).
    public var localURL: URL?
    /// What it will take on the device, worked out when it was queued (or when its download
    /// started, if it was queued offline) from its manifests and the origin's answers for its
    /// first files; nil while unknown. An asset that cannot fit is never started.
    public var estimatedBytes: Int64? = nil
    /// Queued and `blocked(.storage)`: the bytes `maxStorage` and `headroom` lack for its
    /// estimate, after the assets queued ahead of it.
    public var storageShortfall: Int64? = nil
    /// Completed: the ancillary files on the device, in the request's order (one that failed to
    /// download is not among them).
    public var ancillaries: [DownloadedAncillary] = []

    /// 0...1; nil while the size is unknown.
    public var fraction: Double? {
        if state == .completed { return 1 }
        guard let expectedBytes, expectedBytes > 0 else { return nil }
        return min(Double(bytesDownloaded) / Double(expectedBytes), 1)
    }
}

/// What the backplane said when asked for an asset's download (`DownloadOptions.askPermission`).
public enum DownloadPermissionStatus: Sendable, Equatable {
    /// Not asked (no limit is set, or the asset has not reached its turn).
    case notAsked
    case granted(grantId: String)
    case denied(DownloadDenial)

    /// A stable name, e.g. for the harness.
    public var name: String {
        switch self {
        case .notAsked: "notAsked"
        case .granted: "granted"
        case .denied: "denied"
        }
    }
}

/// A denied download permission: the rule at its limit, with every count.
public struct DownloadDenial: Sendable, Equatable, Codable {
    public var rule: DownloadRule
    public var counts: DownloadCounts?
    /// Only an admin's reset lifts it (the lifetime rule); the asset is `failed`.
    public var permanent: Bool

    public init(rule: DownloadRule, counts: DownloadCounts?, permanent: Bool) {
        self.rule = rule
        self.counts = counts
        self.permanent = permanent
    }
}

/// What the download engine is doing.
public enum DownloadEngineStatus: Sendable, Equatable {
    /// The SDK engine is not running.
    case stopped
    /// Nothing to download.
    case idle
    case downloading(assetId: String)
    /// Every asset left errored in this pass; the next pass starts after `retryPassDelay`.
    case waitingToRetry
    case blocked(DownloadBlock)
}

extension DownloadEngineStatus {
    /// Nothing is happening: stopped or idle.
    var isQuiet: Bool { self == .stopped || self == .idle }
}

extension DownloadEngineStatus {
    /// A stable name, e.g. for the harness.
    public var name: String {
        switch self {
        case .stopped: "stopped"
        case .idle: "idle"
        case .downloading: "downloading"
        case .waitingToRetry: "waitingToRetry"
        case .blocked: "blocked"
        }
    }
}
