import Foundation

/// A series whose episodes devices subscribe to, identified by the CMS's feed id.
public struct Feed: Codable, Sendable, Equatable {
    public var feedId: String
    public var title: String
    /// Free-form metadata from the CMS (artwork, genre, ...), passed through to devices.
    public var metadata: [String: JSONValue]?
    public var createdAt: Date
    public var updatedAt: Date

    public init(feedId: String, title: String, metadata: [String: JSONValue]? = nil, createdAt: Date, updatedAt: Date) {
        self.feedId = feedId
        self.title = title
        self.metadata = metadata
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// `PUT /v1/cms/feeds/{feedId}`: creates or replaces a feed.
public struct FeedInput: Codable, Sendable, Equatable {
    public var title: String
    public var metadata: [String: JSONValue]?

    public init(title: String, metadata: [String: JSONValue]? = nil) {
        self.title = title
        self.metadata = metadata
    }
}

public struct FeedList: Codable, Sendable, Equatable {
    public var feeds: [Feed]

    public init(feeds: [Feed]) {
        self.feeds = feeds
    }
}

/// How an episode is downloaded.
public struct MediaType: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// One file (e.g. MP4).
    public static let file = MediaType(rawValue: "file")
    /// An HLS manifest and its segments.
    public static let hls = MediaType(rawValue: "hls")
    /// A static DASH MPD and its segments.
    public static let dash = MediaType(rawValue: "dash")
    /// A Smooth Streaming client manifest and its fragments.
    public static let smooth = MediaType(rawValue: "smooth")
    public static let allCases: [MediaType] = [.file, .hls, .dash, .smooth]
}

/// An episode as the CMS announces it: either with full metadata, or with only `assetId` (the
/// device's data source then looks the rest up).
public struct EpisodeInput: Codable, Sendable, Equatable {
    public var assetId: String
    public var title: String?
    public var description: String?
    public var downloadURL: String?
    public var mediaType: MediaType?
    public var permittedMimeTypes: [String]?
    /// For HLS: the highest bitrate (bits/s) to download.
    public var maxBitrate: Int?
    /// Downloaded early, playable from then on.
    public var publishDate: Date?
    public var expiryDate: Date?
    /// Override the application's settings for this asset.
    public var expiryAfterDownloadSeconds: Int?
    public var expiryAfterPlaySeconds: Int?
    /// Downloads of this asset one account may make over its lifetime: it can only tighten the
    /// application's `maxLifetimeDownloadsPerAsset` (or an admin's asset policy).
    public var maxLifetimeDownloads: Int?
    public var sizeBytes: Int64?
    public var customFields: [String: JSONValue]?

    public init(
        assetId: String, title: String? = nil, description: String? = nil, downloadURL: String? = nil, mediaType: MediaType? = nil,
        permittedMimeTypes: [String]? = nil, maxBitrate: Int? = nil, publishDate: Date? = nil, expiryDate: Date? = nil,
        expiryAfterDownloadSeconds: Int? = nil, expiryAfterPlaySeconds: Int? = nil, sizeBytes: Int64? = nil,
        customFields: [String: JSONValue]? = nil, maxLifetimeDownloads: Int? = nil
    ) {
        self.maxLifetimeDownloads = maxLifetimeDownloads
        self.assetId = assetId
        self.title = title
        self.description = description
        self.downloadURL = downloadURL
        self.mediaType = mediaType
        self.permittedMimeTypes = permittedMimeTypes
        self.maxBitrate = maxBitrate
        self.publishDate = publishDate
        self.expiryDate = expiryDate
        self.expiryAfterDownloadSeconds = expiryAfterDownloadSeconds
        self.expiryAfterPlaySeconds = expiryAfterPlaySeconds
        self.sizeBytes = sizeBytes
        self.customFields = customFields
    }

    /// Only the asset id: the device's data source supplies the rest.
    public var isAssetIdOnly: Bool { downloadURL == nil }
}

/// An episode as stored and delivered: what the CMS sent, plus the feed and the server's times.
public struct Episode: Codable, Sendable, Equatable {
    public var feedId: String
    public var episode: EpisodeInput
    /// When the backplane first received it.
    public var announcedAt: Date
    public var updatedAt: Date

    public init(feedId: String, episode: EpisodeInput, announcedAt: Date, updatedAt: Date) {
        self.feedId = feedId
        self.episode = episode
        self.announcedAt = announcedAt
        self.updatedAt = updatedAt
    }
}

/// `POST /v1/cms/feeds/{feedId}/episodes`: publish (add or replace) up to `WireLimits.maxEpisodesPerBatch`.
public struct PublishEpisodesRequest: Codable, Sendable, Equatable {
    public var episodes: [EpisodeInput]

    public init(episodes: [EpisodeInput]) {
        self.episodes = episodes
    }
}

public struct EpisodeList: Codable, Sendable, Equatable {
    public var episodes: [Episode]
    /// Pass as `cursor` for the next page; absent on the last page.
    public var nextCursor: String?

    public init(episodes: [Episode], nextCursor: String? = nil) {
        self.episodes = episodes
        self.nextCursor = nextCursor
    }
}

/// A device's subscription to a feed. The quota rules are applied on the device; the server
/// keeps them so a subscription's first delivery is bounded by `maxItems`.
public struct Subscription: Codable, Sendable, Equatable {
    public var feedId: String
    /// Keep at most this many items of the feed; nil or ≤ 0 means unlimited.
    public var maxItems: Int?
    /// At the quota: true deletes the oldest items' files to make room, false defers the new item.
    public var autodeleteOldItems: Bool?
    public var subscribedAt: Date
    public var updatedAt: Date

    public init(feedId: String, maxItems: Int? = nil, autodeleteOldItems: Bool? = nil, subscribedAt: Date, updatedAt: Date) {
        self.feedId = feedId
        self.maxItems = maxItems
        self.autodeleteOldItems = autodeleteOldItems
        self.subscribedAt = subscribedAt
        self.updatedAt = updatedAt
    }
}

/// `PUT /v1/subscriptions/{feedId}`: subscribe, or update the rules of a subscription.
public struct SubscribeRequest: Codable, Sendable, Equatable {
    public var maxItems: Int?
    public var autodeleteOldItems: Bool?

    public init(maxItems: Int? = nil, autodeleteOldItems: Bool? = nil) {
        self.maxItems = maxItems
        self.autodeleteOldItems = autodeleteOldItems
    }
}

public struct SubscribeResponse: Codable, Sendable, Equatable {
    public var subscription: Subscription
    public var feed: Feed
    /// The feed's current episodes, newest first, at most `maxItems` (and at most 500), on a new
    /// subscription and on an update alike, so a retried request loses nothing. Later changes
    /// come through the change cursor.
    public var episodes: [Episode]

    public init(subscription: Subscription, feed: Feed, episodes: [Episode]) {
        self.subscription = subscription
        self.feed = feed
        self.episodes = episodes
    }
}

public struct SubscriptionList: Codable, Sendable, Equatable {
    public var subscriptions: [Subscription]

    public init(subscriptions: [Subscription]) {
        self.subscriptions = subscriptions
    }
}

/// One change in a subscribed feed.
public struct EpisodeChange: Codable, Sendable, Equatable {
    public struct Kind: WireVocabulary {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        public static let added = Kind(rawValue: "added")
        public static let updated = Kind(rawValue: "updated")
        public static let retracted = Kind(rawValue: "retracted")
        public static let allCases: [Kind] = [.added, .updated, .retracted]
    }

    public var kind: Kind
    public var feedId: String
    public var assetId: String
    /// The episode as of this change; nil for `retracted`.
    public var episode: Episode?

    public init(kind: Kind, feedId: String, assetId: String, episode: Episode?) {
        self.kind = kind
        self.feedId = feedId
        self.assetId = assetId
        self.episode = episode
    }
}

/// `GET /v1/subscriptions/changes?cursor=…`: the changes after the cursor in the device's
/// subscribed feeds, oldest first.
public struct EpisodeChanges: Codable, Sendable, Equatable {
    public var changes: [EpisodeChange]
    /// Send it back next time (also when `changes` is empty).
    public var cursor: String
    /// More changes follow: ask again with `cursor` right away.
    public var hasMore: Bool
    public var serverTime: Date

    public init(changes: [EpisodeChange], cursor: String, hasMore: Bool, serverTime: Date) {
        self.changes = changes
        self.cursor = cursor
        self.hasMore = hasMore
        self.serverTime = serverTime
    }
}
