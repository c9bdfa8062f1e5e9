import Foundation
import BackplaneWire

/// The device side of subscriptions: subscribe, and read what changed by cursor.
public struct SubscriptionService: Sendable {
    public let store: any BackplaneStore
    let now: @Sendable () -> Date

    /// How many devices follow a feed.
    public func subscriberCount(applicationId: String, feedId: String) async throws -> Int {
        try await store.subscriberCount(applicationId: applicationId, feedId: feedId)
    }

    public init(store: any BackplaneStore, now: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.now = now
    }

    /// Subscribes (or updates the rules). The answer always carries the feed's current episodes,
    /// newest first, at most `maxItems` (and at most `WireLimits.maxChangesPerPage`), so a retried
    /// request loses nothing; changes after the subscription come through `changes`.
    public func subscribe(applicationId: String, deviceId: String, feedId: String, _ request: SubscribeRequest) async throws -> SubscribeResponse {
        if let maxItems = request.maxItems, maxItems > 100_000 {
            throw ServiceError.validation("'maxItems' must be at most 100000 (0 or less: unlimited).", field: "maxItems")
        }
        guard let feed = try await store.feed(applicationId: applicationId, feedId: feedId), feed.deletedAt == nil else {
            throw ServiceError.notFound("No feed '\(feedId)'.")
        }
        let now = now()
        let limit = min(request.maxItems.flatMap { $0 > 0 ? $0 : nil } ?? WireLimits.maxChangesPerPage, WireLimits.maxChangesPerPage)
        let (subscription, _, episodes) = try await store.subscribe(
            SubscriptionRecord(
                applicationId: applicationId, deviceId: deviceId, feedId: feedId, maxItems: request.maxItems,
                autodeleteOldItems: request.autodeleteOldItems, sinceSeq: 0, subscribedAt: now, updatedAt: now),
            initialLimit: limit)
        return SubscribeResponse(subscription: subscription.wire, feed: feed.wire, episodes: episodes.map(\.wire))
    }

    public func unsubscribe(applicationId: String, deviceId: String, feedId: String) async throws {
        guard try await store.unsubscribe(applicationId: applicationId, deviceId: deviceId, feedId: feedId) else {
            throw ServiceError.notFound("Not subscribed to '\(feedId)'.")
        }
    }

    public func subscriptions(applicationId: String, deviceId: String) async throws -> SubscriptionList {
        SubscriptionList(subscriptions: try await store.subscriptions(applicationId: applicationId, deviceId: deviceId).map(\.wire))
    }

    /// The changes after `cursor` in the device's subscribed feeds, oldest first. Exact: the
    /// change log is numbered in commit order, so a later page or sync never skips a change and
    /// never repeats one.
    public func changes(applicationId: String, deviceId: String, cursor: String?, limit: Int?) async throws -> EpisodeChanges {
        let limit = try Validate.pageLimit(limit, default: WireLimits.maxChangesPerPage, max: WireLimits.maxChangesPerPage)
        let after: Int64
        switch try cursor.map(ChangeCursor.decode) {
        case nil: after = 0
        case .seq(let seq)?: after = seq
        case .legacy(let legacySeq)?: after = try await store.changeSeq(applicationId: applicationId, legacySeq: legacySeq)
        }
        let rows = try await store.changes(applicationId: applicationId, deviceId: deviceId, afterSeq: after, limit: limit + 1)
        let page = rows.prefix(limit)
        let changes = page.map { row in
            EpisodeChange(kind: row.kind, feedId: row.feedId, assetId: row.assetId, episode: row.snapshot?.wire)
        }
        return EpisodeChanges(
            changes: changes, cursor: ChangeCursor.encode(page.last?.seq ?? after), hasMore: rows.count > limit, serverTime: now())
    }

    /// Metadata of live episodes updated since a date, in subscribed feeds only or in all feeds.
    /// Nothing is queued by it; pages with `cursor`.
    public func episodes(
        applicationId: String, deviceId: String, since: Date, onlySubscribed: Bool, cursor: String?, limit: Int?
    ) async throws -> EpisodeList {
        let limit = try Validate.pageLimit(limit, default: WireLimits.maxChangesPerPage, max: WireLimits.maxChangesPerPage)
        let feedIds = onlySubscribed
            ? try await store.subscriptions(applicationId: applicationId, deviceId: deviceId).map(\.feedId) : nil
        let after = try cursor.map(EpisodeCursor.decode)
        let rows = try await store.episodes(applicationId: applicationId, updatedSince: since, feedIds: feedIds, after: after, limit: limit + 1)
        let page = Array(rows.prefix(limit))
        let next = rows.count > limit ? page.last.map { EpisodeCursor.encode(EpisodeKey(updatedAt: $0.updatedAt, feedId: $0.feedId, assetId: $0.assetId)) } : nil
        return EpisodeList(episodes: page.map(\.wire), nextCursor: next)
    }
}

extension SubscriptionRecord {
    var wire: Subscription {
        Subscription(feedId: feedId, maxItems: maxItems, autodeleteOldItems: autodeleteOldItems, subscribedAt: subscribedAt, updatedAt: updatedAt)
    }
}
