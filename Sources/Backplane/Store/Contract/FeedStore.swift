import Foundation
import BackplaneWire

/// Feeds, episodes, the change log and subscriptions. The change log is numbered per application
/// in commit order: a reader that has seen change N+1 has seen N (SQLite keeps it by having one
/// writer; a store with concurrent writers must serialise the numbering per application).
public protocol FeedStore: Sendable {
    /// Creates or replaces a feed (undeleting it). Returns the row and whether it was new.
    func upsertFeed(_ feed: FeedRecord) async throws -> (FeedRecord, created: Bool)
    func feed(applicationId: String, feedId: String) async throws -> FeedRecord?
    /// Live (not deleted) feeds, by feed id.
    func feeds(applicationId: String) async throws -> [FeedRecord]
    /// Marks the feed deleted and retracts its live episodes, in one transaction. False when unknown.
    func deleteFeed(applicationId: String, feedId: String, at: Date) async throws -> Bool
    /// One transaction: loads the feed's episodes with these asset ids (retracted ones too), asks
    /// `plan` what to write, writes it and appends one change per write to the change log.
    func writeEpisodes(
        applicationId: String, feedId: String, assetIds: [String],
        _ plan: @escaping @Sendable ([String: EpisodeRecord]) throws -> [EpisodeWrite]
    ) async throws -> [EpisodeWrite]
    /// One episode, live or retracted.
    func episode(applicationId: String, feedId: String, assetId: String) async throws -> EpisodeRecord?
    /// Live episodes updated at or after `since` in the given feeds (all when nil), oldest update
    /// first, after the (updatedAt, feedId, assetId) key `after`.
    func episodes(
        applicationId: String, updatedSince since: Date, feedIds: [String]?, after: EpisodeKey?, limit: Int
    ) async throws -> [EpisodeRecord]

    /// Creates or updates a subscription; a new one records the change log position, in the same
    /// transaction as reading the feed's current episodes (newest first, at most `initialLimit`).
    func subscribe(
        _ subscription: SubscriptionRecord, initialLimit: Int?
    ) async throws -> (SubscriptionRecord, created: Bool, episodes: [EpisodeRecord])
    func unsubscribe(applicationId: String, deviceId: String, feedId: String) async throws -> Bool
    func subscriptions(applicationId: String, deviceId: String) async throws -> [SubscriptionRecord]
    /// Devices subscribed to a feed.
    func subscriberIds(applicationId: String, feedId: String) async throws -> [String]
    /// How many devices are subscribed to a feed, counted in its index.
    func subscriberCount(applicationId: String, feedId: String) async throws -> Int
    /// Changes after `afterSeq` in the device's subscribed feeds (each after its subscription's
    /// `sinceSeq`), in sequence order. Sequence numbers count each application's changes from 1.
    func changes(applicationId: String, deviceId: String, afterSeq: Int64, limit: Int) async throws -> [EpisodeChangeRecord]
    /// The application's sequence number standing for `legacySeq`, a number from the change log
    /// shared by all applications before migration v6 (the last change at or before it; 0 if none).
    func changeSeq(applicationId: String, legacySeq: Int64) async throws -> Int64
}

public struct FeedRecord: Sendable, Equatable, Codable {
    public var applicationId: String
    public var feedId: String
    public var title: String
    public var metadata: [String: JSONValue]?
    public var createdAt: Date
    public var updatedAt: Date
    public var deletedAt: Date?
}

public struct EpisodeRecord: Sendable, Equatable, Codable {
    public var applicationId: String
    public var feedId: String
    public var assetId: String
    public var episode: EpisodeInput
    public var announcedAt: Date
    public var updatedAt: Date
    public var retractedAt: Date?
}

/// One write the service decided on: the episode's new row and the change it makes visible.
public struct EpisodeWrite: Sendable {
    public var record: EpisodeRecord
    public var kind: EpisodeChange.Kind
}

/// An entry of the change log: every episode write gets the next sequence number, in commit order.
public struct EpisodeChangeRecord: Sendable, Equatable {
    public var seq: Int64
    public var feedId: String
    public var assetId: String
    public var kind: EpisodeChange.Kind
    /// The episode as of this change (nil for a retraction).
    public var snapshot: EpisodeRecord?
}

public struct SubscriptionRecord: Sendable, Equatable, Codable {
    public var applicationId: String
    public var deviceId: String
    public var feedId: String
    public var maxItems: Int?
    public var autodeleteOldItems: Bool?
    /// The change log position when the device subscribed: the subscription's first answer
    /// carried the feed as of then, so changes at or before it are not sent again.
    public var sinceSeq: Int64
    public var subscribedAt: Date
    public var updatedAt: Date
}

/// Position in a listing of episodes ordered by update time.
public struct EpisodeKey: Sendable, Equatable {
    public var updatedAt: Date
    public var feedId: String
    public var assetId: String

    public init(updatedAt: Date, feedId: String, assetId: String) {
        self.updatedAt = updatedAt
        self.feedId = feedId
        self.assetId = assetId
    }
}
