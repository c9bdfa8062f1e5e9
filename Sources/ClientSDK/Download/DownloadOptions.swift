import Foundation

/// How the download engine works and the rules that stop it. Values out of range are clamped,
/// in `init` and on assignment alike.
public struct DownloadOptions: Sendable {
    /// Files of one asset fetched at the same time when its download starts (HLS and DASH
    /// segments): 1 to 16, default 4. With `adaptsConcurrency` the engine then finds the number
    /// the link rewards, within the per-host caps; without, it holds this number. Assets
    /// themselves are downloaded one at a time, in queue order.
    public var parallelFiles: Int {
        didSet { parallelFiles = Self.clampParallel(parallelFiles) }
    }
    /// Whether the number of files fetched at once follows the link (default on): it grows
    /// while throughput grows, and backs off on errors, on an overloaded origin (429, 5xx) and
    /// on falling throughput. A far CDN with small segments needs many requests in flight, a
    /// near one a few; an app cannot know which it has.
    public var adaptsConcurrency: Bool
    /// Requests in flight to one host over HTTP/1.1, each on a connection of its own: 1 to 64,
    /// default 16.
    public var maxConnectionsPerHost: Int {
        didSet { maxConnectionsPerHost = Self.clamp(maxConnectionsPerHost, Self.connectionsPerHostRange) }
    }
    /// Requests in flight to one host that answers over HTTP/2, all on one connection: 1 to
    /// 256, default 128 (the origin's `SETTINGS_MAX_CONCURRENT_STREAMS` bounds it too).
    public var maxStreamsPerHost: Int {
        didSet { maxStreamsPerHost = Self.clamp(maxStreamsPerHost, Self.streamsPerHostRange) }
    }
    /// The most downloads take from the network, in bytes per second over every file in
    /// flight (nil, the default: no cap; at least 16 KiB/s). `engine.downloads.setBandwidthLimit`
    /// changes it while the engine runs, e.g. while the user streams.
    public var maxBytesPerSecond: Int64? {
        didSet { maxBytesPerSecond = maxBytesPerSecond.map { max($0, BandwidthLimit.lowest) } }
    }
    /// A PEM file of certificate authorities trusted for origins beside the system's (an
    /// enterprise CDN, a test origin); nil: the system's alone.
    public var originCertificateAuthorities: URL?
    /// Common Media Client Data (CTA-5004) on every file request of a download, for the CDN's
    /// logs (nil, the default: none). See `CMCDOptions` for what is sent.
    public var cmcd: CMCDOptions?
    /// Bytes the SDK's downloads may occupy in all (nil: no limit besides `headroom`).
    public var maxStorage: Int64? {
        didSet { maxStorage = maxStorage.map { max($0, 0) } }
    }
    /// Bytes to leave free on the volume, checked against the file system's free space.
    public var headroom: Int64 {
        didSet { headroom = max(headroom, 0) }
    }
    /// Completed assets the device may hold (at least 0); the engine blocks at the limit.
    public var maxDownloadedAssets: Int {
        didSet { maxDownloadedAssets = max(maxDownloadedAssets, 0) }
    }
    /// Download over an expensive (cellular) network.
    public var downloadOverCellular: Bool
    /// Flush each downloaded file to the disk before it counts as downloaded (default off).
    /// Without the flush, written files are the system's to write, as a browser's or curl's are:
    /// an app kill loses nothing, and a power loss or a system crash in the seconds after a file
    /// was written is caught at the engine's next start (the system's run has changed): a
    /// completed asset whose files no longer add up to its size is downloaded again, and one
    /// still downloading starts over. With the flush nothing is ever downloaded twice, at the
    /// cost of throughput wherever the disk is slower than the network (`benchmarks/download`
    /// measures both). Where the SDK cannot tell one run of the system from the next, files are
    /// flushed whatever this says.
    public var flushesFiles: Bool
    /// Which run of the operating system this is (`BootSession`); tests stand in a restart.
    var bootSession: @Sendable () -> String? = BootSession.current
    /// How a fetch waits before it is tried again (`FetchRetry`); tests record the waits
    /// instead of spending them.
    var waitBeforeRetry: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    /// The clock `maxBytesPerSecond` keeps its schedule on, and how a fetch it holds back
    /// waits; tests move a clock of their own instead of spending the waits.
    var bandwidthClock: (now: @Sendable () -> ContinuousClock.Instant, sleep: @Sendable (ContinuousClock.Instant) async throws -> Void) = (
        { ContinuousClock.now }, { try await Task.sleep(until: $0, clock: .continuous) }
    )
    /// What the network is; the default says always available, never cellular (Linux, tests).
    public var network: any NetworkMonitor
    /// What the device's power is; the default says on mains power (Linux, tests).
    public var power: any PowerMonitor
    /// What the device must offer before downloads run beside the network rule: a charger, a
    /// battery level, an unmetered network (all off by default).
    public var conditions: DownloadConditions
    /// How long the engine waits before the next pass through the queue when assets of the
    /// last pass ended in an error (10 ms to a day).
    public var retryPassDelay: Duration {
        didSet { retryPassDelay = Self.clampDelay(retryPassDelay) }
    }
    /// How often a queue blocked by storage looks again at the free space (10 ms to a day);
    /// deleting an asset through the SDK looks at once.
    public var storageRecheck: Duration {
        didSet { storageRecheck = Self.clampDelay(storageRecheck) }
    }

    /// When the engine asks the backplane for permission before an asset's download starts.
    public var askPermission: PermissionAsking

    /// The slowest a file or playlist may arrive before its try fails (default 1 KiB/s over
    /// 30 s; `bytesPerSecond` 0 turns it off). A silence ends a try after 30 s whatever this says.
    public var minimumTransferRate: TransferRate

    /// What one HLS asset's playlists may take in all: bytes (counted against `maxStorage` and
    /// `headroom` too) and segments over every stream chosen. Past either the asset fails as
    /// `.playlist`. Defaults: 32 MiB and 100,000 segments (a ten-hour title in 2-second
    /// segments is 18,000 per stream).
    public var playlistLimits: PlaylistLimits

    /// When the engine asks for the permission, if it asks.
    public var permissionTiming: PermissionTiming

    /// The app's source of fresh URLs for assets whose signed URLs expire: asked when an origin
    /// answers `401`, `403` or `410` during a download, before the failure counts (nil: none).
    public var urlRefresher: (any URLRefresher)? = nil

    /// When in an asset's life the permission is asked.
    public enum PermissionTiming: Sendable, Equatable {
        /// When its download is about to start: a queue filled offline is asked for as it runs.
        case atDownloadStart
        /// When it is queued: a denial is thrown by `enqueue` and nothing is queued, so the app
        /// learns at once; with no answer (offline) it is queued and asked at download start.
        case atQueueTime
    }

    /// When to ask the backplane for a download permission (`POST /v1/download-grants`).
    public enum PermissionAsking: Sendable, Equatable {
        /// When the application sets any download limit (per device, per account, copies, lifetime).
        case whenLimited
        /// Before every download, also without limits: for apps whose license server checks entitlements.
        case always
    }

    public init(
        parallelFiles: Int = 4, maxStorage: Int64? = nil, headroom: Int64 = 500 << 20, maxDownloadedAssets: Int = 100,
        downloadOverCellular: Bool = false, flushesFiles: Bool = false, network: any NetworkMonitor = AlwaysOnNetwork(),
        retryPassDelay: Duration = .seconds(30), storageRecheck: Duration = .seconds(30), askPermission: PermissionAsking = .whenLimited,
        permissionTiming: PermissionTiming = .atDownloadStart, minimumTransferRate: TransferRate = .default,
        playlistLimits: PlaylistLimits = .default, power: any PowerMonitor = MainsPower(), conditions: DownloadConditions = DownloadConditions(),
        adaptsConcurrency: Bool = true, maxConnectionsPerHost: Int = 16, maxStreamsPerHost: Int = 128, maxBytesPerSecond: Int64? = nil,
        originCertificateAuthorities: URL? = nil, cmcd: CMCDOptions? = nil
    ) {
        self.cmcd = cmcd
        self.power = power
        self.conditions = conditions
        self.adaptsConcurrency = adaptsConcurrency
        self.maxConnectionsPerHost = Self.clamp(maxConnectionsPerHost, Self.connectionsPerHostRange)
        self.maxStreamsPerHost = Self.clamp(maxStreamsPerHost, Self.streamsPerHostRange)
        self.maxBytesPerSecond = maxBytesPerSecond.map { max($0, BandwidthLimit.lowest) }
        self.originCertificateAuthorities = originCertificateAuthorities
        self.minimumTransferRate = minimumTransferRate
        self.playlistLimits = playlistLimits
        self.askPermission = askPermission
        self.permissionTiming = permissionTiming
        self.parallelFiles = Self.clampParallel(parallelFiles)
        self.maxStorage = maxStorage.map { max($0, 0) }
        self.headroom = max(headroom, 0)
        self.maxDownloadedAssets = max(maxDownloadedAssets, 0)
        self.downloadOverCellular = downloadOverCellular
        self.flushesFiles = flushesFiles
        self.network = network
        self.retryPassDelay = Self.clampDelay(retryPassDelay)
        self.storageRecheck = Self.clampDelay(storageRecheck)
    }

    /// A wait long enough to be harmless and short enough for `Task.sleep` to hold.
    private static func clampDelay(_ value: Duration) -> Duration {
        min(max(value, .milliseconds(10)), .seconds(86_400))
    }

    private static func clampParallel(_ value: Int) -> Int {
        min(max(value, 1), 16)
    }

    static let connectionsPerHostRange = 1...64
    static let streamsPerHostRange = 1...256

    private static func clamp(_ value: Int, _ range: ClosedRange<Int>) -> Int {
        min(max(value, range.lowerBound), range.upperBound)
    }
}

/// Bounds on one HLS asset's playlists (`DownloadOptions.playlistLimits`). Values are clamped
/// to at least one playlist's worth: 1 KiB and one segment.
public struct PlaylistLimits: Sendable, Equatable {
    public var bytes: Int64 {
        didSet { bytes = max(bytes, 1024) }
    }
    public var segments: Int {
        didSet { segments = max(segments, 1) }
    }

    public init(bytes: Int64, segments: Int) {
        self.bytes = max(bytes, 1024)
        self.segments = max(segments, 1)
    }

    public static let `default` = PlaylistLimits(bytes: 32 << 20, segments: 100_000)
}

/// What the network offers downloads now.
public struct NetworkStatus: Sendable, Equatable {
    public var isAvailable: Bool
    /// Cellular, or a hotspot the system marks expensive.
    public var isExpensive: Bool
    /// Charged by use or limited by the user, though not expensive: Android's metered Wi-Fi,
    /// Apple's Low Data Mode (`NWPath.isConstrained`). Matters only to
    /// `DownloadConditions.requiresUnmeteredNetwork`, for which an expensive network is metered too.
    public var isMetered: Bool

    public init(isAvailable: Bool, isExpensive: Bool, isMetered: Bool = false) {
        self.isAvailable = isAvailable
        self.isExpensive = isExpensive
        self.isMetered = isMetered
    }
}

/// The app's view of the network, e.g. from `NWPathMonitor` on Apple platforms. The engine reads
/// `status` before each file and follows `changes()`: it pauses when downloads may not run and
/// goes on when they may.
public protocol NetworkMonitor: Sendable {
    var status: NetworkStatus { get }
    /// Every change of `status`, for as long as the engine runs.
    func changes() -> AsyncStream<NetworkStatus>
}

/// Always available, never expensive: the default where the SDK cannot ask the system.
public struct AlwaysOnNetwork: NetworkMonitor {
    public init() {}
    public var status: NetworkStatus { NetworkStatus(isAvailable: true, isExpensive: false) }
    public func changes() -> AsyncStream<NetworkStatus> { AsyncStream { $0.finish() } }
}
