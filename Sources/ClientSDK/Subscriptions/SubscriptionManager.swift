import Foundation
import BackplaneWire

/// Subscriptions of this device: `engine.subscriptions`. Changes in subscribed feeds are read at
/// every sync of the engine (start, interval, `syncNow()`, wake-ups) and turned into queued
/// items under the feed's quota rules.
public struct SubscriptionManager: Sendable {
    let engine: BackplaneEngine

    /// Subscribes to a feed (or updates its rules); nil rules take the configuration's defaults.
    /// The feed's current episodes are queued at once, newest first, within `maxItems`.
    @discardableResult
    public func subscribe(feedId: String, maxItems: Int? = nil, autodeleteOldItems: Bool? = nil) async throws -> Subscription {
        try await engine.subscribe(feedId: feedId, request: SubscribeRequest(maxItems: maxItems, autodeleteOldItems: autodeleteOldItems))
    }

    /// Unsubscribes; items already queued or downloaded stay.
    public func unsubscribe(feedId: String) async throws {
        try await engine.unsubscribe(feedId: feedId)
    }

    public func list() async throws -> [Subscription] {
        try await engine.listSubscriptions()
    }

    /// Metadata of episodes updated since `date` (subscribed feeds only, or all), handed to the
    /// data source's `didReceive` and returned. Queues nothing: reading the subscribed feeds'
    /// changes into the queue is part of every `engine.sync()`.
    @discardableResult
    public func episodesUpdated(since date: Date, onlySubscribed: Bool = true) async throws -> [Episode] {
        try await engine.episodes(since: date, onlySubscribed: onlySubscribed)
    }

    /// Counts an asset the app queued or downloaded itself toward a feed's quota, as the items
    /// that came through the subscription count (the vendor's "include item in tracking
    /// feed"): when the feed is full, autodelete may delete it as one of the oldest, or new
    /// episodes are deferred while it is there. Its item is `queued` or `downloaded` as its
    /// download is. Local: no request to the backplane. Throws `.invalidInput` when the SDK
    /// neither queues nor holds the asset, or another feed tracks it.
    @discardableResult
    public func includeItem(assetId: String, inTrackingFeed feedId: String) async throws -> SubscriptionItem {
        try await engine.includeItem(assetId: assetId, inTrackingFeed: feedId)
    }

    /// The subscription items the SDK holds (one feed, or all), oldest first.
    public func items(feedId: String? = nil) async throws -> [SubscriptionItem] {
        try await engine.subscriptionItems(feedId: feedId)
    }
}
