import Foundation
import BackplaneWire

/// An episode that came through a subscription (or was added to one's tracking), as the SDK's
/// download queue holds it. The download engine consumes `queued` items.
public struct SubscriptionItem: Sendable, Equatable, Codable {
    public enum State: String, Sendable, Codable {
        /// Waiting to be downloaded.
        case queued
        /// Created but not to be downloaded: the feed was at its quota without autodelete.
        case deferred
        /// Its files are on the device.
        case downloaded
        /// Its files were deleted to make room (autodelete); it no longer counts toward the quota.
        case reset
    }

    public var assetId: String
    public var feedId: String
    /// Complete metadata (from the backplane or the data source).
    public var metadata: EpisodeInput
    public var state: State
    /// Came through the subscription; only such items count toward the feed's quota.
    public var viaSubscription: Bool
    public var addedAt: Date
}

/// Supplies what the backplane does not carry. Register one in the configuration before
/// `start()`; the default uses the backplane's metadata as it is.
public protocol SubscriptionDataSource: Sendable {
    /// The complete metadata of an episode, given what the backplane sent (perhaps only the asset
    /// id). Return nil to skip the episode.
    func metadata(for episode: Episode) async throws -> EpisodeInput?
    /// Last word before an episode becomes an item; false skips it.
    func willAdd(_ metadata: EpisodeInput, feedId: String) async -> Bool
    /// After each change was handled.
    func didProcess(_ change: EpisodeChange, result: SubscriptionChangeResult) async
    /// Metadata from `subscriptions.episodesUpdated(since:onlySubscribed:)`, which queues nothing.
    func didReceive(_ episodes: [Episode]) async
}

extension SubscriptionDataSource {
    /// The backplane's metadata as it is; an asset-id-only episode has no download URL and is skipped.
    public func metadata(for episode: Episode) async throws -> EpisodeInput? {
        episode.episode.isAssetIdOnly ? nil : episode.episode
    }

    public func willAdd(_ metadata: EpisodeInput, feedId: String) async -> Bool { true }
    public func didProcess(_ change: EpisodeChange, result: SubscriptionChangeResult) async {}
    public func didReceive(_ episodes: [Episode]) async {}
}

/// The default data source: the backplane's metadata.
public struct BackplaneMetadataDataSource: SubscriptionDataSource {
    public init() {}
}

/// What handling one change did.
public enum SubscriptionChangeResult: Sendable, Equatable {
    case added
    case deferred
    case updated
    /// Removed from the queue (a retraction of an item not downloaded).
    case removed
    /// Nothing to do: no metadata, refused by `willAdd`, or a retraction of something unknown or downloaded.
    case skipped(reason: String)
}

/// Activity of the subscription manager, for status displays.
public enum SubscriptionStatus: String, Sendable {
    case started, receiving, offline, errors
}

/// Counts of one subscription sync.
public struct SubscriptionSyncSummary: Sendable, Equatable {
    public var changes: Int = 0
    public var added: Int = 0
    public var deferred: Int = 0
    public var removed: Int = 0
    /// Items reset to make room (autodelete).
    public var reset: Int = 0
}
