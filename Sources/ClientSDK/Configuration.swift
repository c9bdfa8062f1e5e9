import Foundation
import Shared

/// Everything an app gives the SDK at start-up. Only the first five fields are required.
public struct BackplaneClientConfiguration: Sendable {
    /// The backplane's base URL, e.g. `https://backplane.example.com` (a path prefix is allowed).
    public var backplaneURL: URL
    /// The app key the app build embeds.
    public var appKeyId: String
    public var appKeySecret: String
    /// The app's user (a person or a household). The device limit counts devices per user.
    public var userId: String
    /// Where the SDK keeps its state (device id, credential, last sync). One directory per engine.
    public var dataDirectory: URL

    /// An id the app keeps for this device, for support look-ups.
    public var externalDeviceId: String?
    public var nickname: String?
    /// Sent at registration and sync; defaults describe the running system.
    public var platform: String
    public var model: String?
    public var osVersion: String?
    public var appVersion: String?
    /// When the device is registered to another user (a different person signed in on it),
    /// move it to `userId` instead of failing with `deviceAlreadyRegistered`.
    public var moveFromOtherUser: Bool
    /// How often the engine syncs on its own, besides at start and on `syncNow()`.
    public var syncInterval: Duration
    /// Backoff between failed syncs.
    public var retry: RetryPolicy
    /// Per-request timeout.
    public var requestTimeout: Duration
    /// HTTP; defaults to async-http-client's shared client. Swap it in tests or to add a proxy.
    public var transport: (any Transport)?
    /// Where the device id lives; defaults to a file in `dataDirectory`.
    public var identityStore: (any DeviceIdentityStore)?
    /// Keep a WebSocket open to the backplane while started, so remote commands and changes arrive
    /// at once instead of at the next interval sync.
    public var useWakeUpChannel: Bool
    /// Completes episode metadata for subscriptions; nil uses the backplane's metadata.
    public var subscriptionDataSource: (any SubscriptionDataSource)?
    /// Default quota of items per subscribed feed (≤ 0: unlimited); a subscription may override it.
    public var maxItemsPerFeed: Int
    /// Default rule at the quota: true resets (deletes the files of) the oldest items to make room,
    /// false creates the new item deferred. A subscription may override it.
    public var autodeleteOldItems: Bool
    /// Event types not logged (the mandatory ones are logged whatever this says). The logger's
    /// `setLoggingEnabled` changes it at run time.
    public var disabledEventTypes: Set<EventType>
    /// Events per upload (at most `WireLimits.maxEventsPerBatch`).
    public var eventBatchSize: Int
    /// Upload as soon as this many events are queued...
    public var eventUploadThreshold: Int
    /// ...or when the oldest queued event is this old. Events also go up after every sync, at
    /// start, and (best effort) at shutdown.
    public var maxEventAge: Duration

    public init(
        backplaneURL: URL, appKeyId: String, appKeySecret: String, userId: String, dataDirectory: URL,
        externalDeviceId: String? = nil, nickname: String? = nil, platform: String = ClientPlatform.name,
        model: String? = nil, osVersion: String? = ClientPlatform.osVersion, appVersion: String? = nil,
        moveFromOtherUser: Bool = false, syncInterval: Duration = .seconds(15 * 60), retry: RetryPolicy = RetryPolicy(),
        requestTimeout: Duration = .seconds(30), transport: (any Transport)? = nil, identityStore: (any DeviceIdentityStore)? = nil,
        useWakeUpChannel: Bool = true, subscriptionDataSource: (any SubscriptionDataSource)? = nil,
        maxItemsPerFeed: Int = 0, autodeleteOldItems: Bool = true, disabledEventTypes: Set<EventType> = [],
        eventBatchSize: Int = 100, eventUploadThreshold: Int = 50, maxEventAge: Duration = .seconds(60)
    ) {
        self.backplaneURL = backplaneURL
        self.appKeyId = appKeyId
        self.appKeySecret = appKeySecret
        self.userId = userId
        self.dataDirectory = dataDirectory
        self.externalDeviceId = externalDeviceId
        self.nickname = nickname
        self.platform = platform
        self.model = model
        self.osVersion = osVersion
        self.appVersion = appVersion
        self.moveFromOtherUser = moveFromOtherUser
        self.syncInterval = syncInterval
        self.retry = retry
        self.requestTimeout = requestTimeout
        self.transport = transport
        self.identityStore = identityStore
        self.useWakeUpChannel = useWakeUpChannel
        self.subscriptionDataSource = subscriptionDataSource
        self.maxItemsPerFeed = maxItemsPerFeed
        self.autodeleteOldItems = autodeleteOldItems
        self.disabledEventTypes = disabledEventTypes
        self.eventBatchSize = min(max(eventBatchSize, 1), WireLimits.maxEventsPerBatch)
        self.eventUploadThreshold = max(eventUploadThreshold, 1)
        self.maxEventAge = maxEventAge
    }
}

/// Exponential backoff with jitter: the n-th consecutive failure waits
/// `min(maximum, initial * multiplier^(n-1))`, less a random part of up to `jitter` of it.
public struct RetryPolicy: Sendable, Equatable {
    public var initial: Duration
    public var maximum: Duration
    public var multiplier: Double
    /// 0...1: the fraction of each delay that is randomised, so that many devices coming back
    /// after an outage do not all retry at the same instant.
    public var jitter: Double

    public init(initial: Duration = .seconds(2), maximum: Duration = .seconds(300), multiplier: Double = 2, jitter: Double = 0.5) {
        self.initial = initial
        self.maximum = maximum
        self.multiplier = multiplier
        self.jitter = min(max(jitter, 0), 1)
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
