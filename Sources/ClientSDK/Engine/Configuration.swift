import Foundation
import BackplaneWire

/// Everything an app gives the SDK at start-up. The five values of `init`'s first line are
/// required; the groups have sane defaults. Every limit holds however a value is set: a value
/// out of range is clamped to the nearest allowed one, in `init` and on assignment alike.
public struct BackplaneClientConfiguration: Sendable {
    /// The backplane's base URL, e.g. `https://backplane.example.com` (a path prefix is allowed).
    public var backplaneURL: URL
    /// The app key the app build embeds.
    public var appKeyId: String
    public var appKeySecret: String
    /// The app's user (a person or a household). The device limit counts devices per user.
    public var userId: String
    /// Where the SDK keeps its state (device id, credential, queues). One directory per engine.
    public var dataDirectory: URL

    /// What the device says about itself at registration and sync.
    public var device: DeviceDescription
    /// When the engine syncs, how it retries, how long a request may take.
    public var sync: SyncOptions
    /// What the event log records and when it uploads.
    public var eventLog: EventLogOptions
    /// Default rules of subscribed feeds and where episode metadata comes from.
    public var subscriptions: SubscriptionOptions
    /// How downloads run and the storage and network rules that stop them.
    public var downloads: DownloadOptions
    /// How playback rights are judged: the clocks, the expiry sweep, the app's license provider.
    public var rights: RightsOptions
    /// The limits of the loopback server players play downloads through (`engine.playback`).
    public var playback: PlaybackOptions

    /// HTTP; defaults to async-http-client's shared client. Swap it in tests or to add a proxy.
    public var transport: (any Transport)?
    /// A PEM file of certificate authorities trusted for the backplane's TLS certificate (its
    /// requests and its wake-up channel) in addition to the system's: for a backplane whose
    /// certificate a private CA issued. Nil trusts the system's authorities alone. Not used by a
    /// `transport` of the app's own, which decides its own trust.
    public var trustedCertificateAuthorities: URL?
    /// Where the device id and key live; defaults to files in `dataDirectory`.
    public var identityStore: (any DeviceIdentityStore)?
    /// Where the application requires user tokens: asks the app's own backend for a token for
    /// the user (a short-lived JWT its server signs; docs/sdk.md). The engine calls it when it
    /// registers the device (first start, a new user, a move) and once more when the backplane
    /// refuses the token it sent. The token is never stored. Nil sends none.
    public var userToken: (@Sendable (_ userId: String) async throws -> String)?

    public init(
        backplaneURL: URL, appKeyId: String, appKeySecret: String, userId: String, dataDirectory: URL,
        device: DeviceDescription = DeviceDescription(), sync: SyncOptions = SyncOptions(),
        eventLog: EventLogOptions = EventLogOptions(), subscriptions: SubscriptionOptions = SubscriptionOptions(),
        downloads: DownloadOptions = DownloadOptions(), rights: RightsOptions = RightsOptions(),
        playback: PlaybackOptions = PlaybackOptions(), transport: (any Transport)? = nil,
        identityStore: (any DeviceIdentityStore)? = nil, trustedCertificateAuthorities: URL? = nil,
        userToken: (@Sendable (_ userId: String) async throws -> String)? = nil
    ) {
        self.backplaneURL = backplaneURL
        self.appKeyId = appKeyId
        self.appKeySecret = appKeySecret
        self.userId = userId
        self.dataDirectory = dataDirectory
        self.device = device
        self.sync = sync
        self.eventLog = eventLog
        self.subscriptions = subscriptions
        self.downloads = downloads
        self.rights = rights
        self.playback = playback
        self.transport = transport
        self.identityStore = identityStore
        self.trustedCertificateAuthorities = trustedCertificateAuthorities
        self.userToken = userToken
    }
}

/// What the device reports about itself; the defaults describe the running system.
public struct DeviceDescription: Sendable {
    /// An id the app keeps for this device, for support look-ups.
    public var externalDeviceId: String?
    public var nickname: String?
    public var platform: String
    public var model: String?
    public var osVersion: String?
    public var appVersion: String?
    /// When the device is registered to another user (a different person signed in on it),
    /// move it to the configured user instead of failing with `deviceAlreadyRegistered`.
    public var moveFromOtherUser: Bool

    public init(
        externalDeviceId: String? = nil, nickname: String? = nil, platform: String = ClientPlatform.name, model: String? = nil,
        osVersion: String? = ClientPlatform.osVersion, appVersion: String? = nil, moveFromOtherUser: Bool = false
    ) {
        self.externalDeviceId = externalDeviceId
        self.nickname = nickname
        self.platform = platform
        self.model = model
        self.osVersion = osVersion
        self.appVersion = appVersion
        self.moveFromOtherUser = moveFromOtherUser
    }
}

public struct SyncOptions: Sendable {
    /// The shortest interval: a smaller one would keep a device syncing without pause.
    public static let minimumInterval: Duration = .seconds(1)

    /// How often the engine syncs on its own, besides at start, on `syncNow()` and on wake-ups.
    /// At least `minimumInterval`.
    public var interval: Duration {
        didSet { interval = max(interval, Self.minimumInterval) }
    }
    /// Backoff between failed syncs (and failed uploads, and channel reconnections).
    public var retry: RetryPolicy
    /// How long one request may take. At least one second.
    public var requestTimeout: Duration {
        didSet { requestTimeout = max(requestTimeout, .seconds(1)) }
    }
    /// Keep a WebSocket open to the backplane while started, so remote commands and changes
    /// arrive at once instead of at the next interval sync.
    public var useWakeUpChannel: Bool

    public init(
        interval: Duration = .seconds(15 * 60), retry: RetryPolicy = RetryPolicy(), requestTimeout: Duration = .seconds(30),
        useWakeUpChannel: Bool = true
    ) {
        self.interval = max(interval, Self.minimumInterval)
        self.retry = retry
        self.requestTimeout = max(requestTimeout, .seconds(1))
        self.useWakeUpChannel = useWakeUpChannel
    }
}

public struct EventLogOptions: Sendable {
    /// Event types not logged (the mandatory ones are logged whatever this says). The logger's
    /// `setLoggingEnabled` changes it at run time.
    public var disabledTypes: Set<EventType>
    /// Events per upload: 1 to `WireLimits.maxEventsPerBatch`, the most the backplane takes in one.
    public var batchSize: Int {
        didSet { batchSize = Self.clampBatchSize(batchSize) }
    }
    /// Upload as soon as this many events are queued (at least 1)...
    public var uploadThreshold: Int {
        didSet { uploadThreshold = max(uploadThreshold, 1) }
    }
    /// ...or when the oldest queued event is this old (at least 0). Events also go up after every
    /// sync, at start, and (best effort) at shutdown.
    public var maxAge: Duration {
        didSet { maxAge = max(maxAge, .zero) }
    }

    public init(disabledTypes: Set<EventType> = [], batchSize: Int = 100, uploadThreshold: Int = 50, maxAge: Duration = .seconds(60)) {
        self.disabledTypes = disabledTypes
        self.batchSize = Self.clampBatchSize(batchSize)
        self.uploadThreshold = max(uploadThreshold, 1)
        self.maxAge = max(maxAge, .zero)
    }

    private static func clampBatchSize(_ size: Int) -> Int {
        min(max(size, 1), WireLimits.maxEventsPerBatch)
    }
}

public struct SubscriptionOptions: Sendable {
    /// Completes episode metadata for subscriptions; nil uses the backplane's metadata.
    public var dataSource: (any SubscriptionDataSource)?
    /// Default quota of items per subscribed feed (≤ 0: unlimited); a subscription may override it.
    public var maxItemsPerFeed: Int
    /// Default rule at the quota: true resets (deletes the files of) the oldest items to make room,
    /// false creates the new item deferred. A subscription may override it.
    public var autodeleteOldItems: Bool

    public init(dataSource: (any SubscriptionDataSource)? = nil, maxItemsPerFeed: Int = 0, autodeleteOldItems: Bool = true) {
        self.dataSource = dataSource
        self.maxItemsPerFeed = maxItemsPerFeed
        self.autodeleteOldItems = autodeleteOldItems
    }
}

/// Exponential backoff with jitter: the n-th consecutive failure waits
/// `min(maximum, initial * multiplier^(n-1))`, less a random part of up to `jitter` of it.
/// Values out of range are clamped, in `init` and on assignment alike.
public struct RetryPolicy: Sendable, Equatable {
    /// The first delay: at least 1 ms.
    public var initial: Duration {
        didSet { initial = max(initial, .milliseconds(1)) }
    }
    /// The longest delay: at least 1 ms.
    public var maximum: Duration {
        didSet { maximum = max(maximum, .milliseconds(1)) }
    }
    /// At least 1 (delays never shrink).
    public var multiplier: Double {
        didSet { multiplier = Self.clampMultiplier(multiplier) }
    }
    /// 0...1: the fraction of each delay that is randomised, so that many devices coming back
    /// after an outage do not all retry at the same instant.
    public var jitter: Double {
        didSet { jitter = Self.clampJitter(jitter) }
    }

    public init(initial: Duration = .seconds(2), maximum: Duration = .seconds(300), multiplier: Double = 2, jitter: Double = 0.5) {
        self.initial = max(initial, .milliseconds(1))
        self.maximum = max(maximum, .milliseconds(1))
        self.multiplier = Self.clampMultiplier(multiplier)
        self.jitter = Self.clampJitter(jitter)
    }

    private static func clampMultiplier(_ value: Double) -> Double {
        value.isFinite ? max(value, 1) : 1
    }

    private static func clampJitter(_ value: Double) -> Double {
        value.isFinite ? min(max(value, 0), 1) : 0
    }

    public func delay(afterFailures failures: Int, random: Double = Double.random(in: 0..<1)) -> Duration {
        let exponent = Double(max(failures - 1, 0))
        let base = min(initial.seconds * pow(multiplier, exponent), maximum.seconds)
        return .milliseconds(Int64((base * (1 - jitter * random)) * 1000))
    }
}

/// What the SDK reports about the system it runs on.
public enum ClientPlatform {
    public static var name: String {
        #if os(iOS)
        "ios"
        #elseif os(tvOS)
        "tvos"
        #elseif os(watchOS)
        "watchos"
        #elseif os(visionOS)
        "visionos"
        #elseif os(macOS)
        "macos"
        #elseif os(Android)
        "android"
        #elseif os(Windows)
        "windows"
        #elseif os(Linux)
        "linux"
        #else
        "unknown"
        #endif
    }

    public static var osVersion: String {
        let version = ProcessInfo.processInfo.operatingSystemVersion
        return "\(version.majorVersion).\(version.minorVersion).\(version.patchVersion)"
    }
}
