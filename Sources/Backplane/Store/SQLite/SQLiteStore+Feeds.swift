import Foundation
import GRDB
import BackplaneWire

/// Feeds, episodes, their change log and the subscriptions that read it.
extension SQLiteStore {

    public func upsertFeed(_ feed: FeedRecord) async throws -> (FeedRecord, created: Bool) {
        try await write { db in
            var feed = feed
            if let existing = try Self.feed(db, applicationId: feed.applicationId, feedId: feed.feedId) {
                feed.createdAt = existing.createdAt
                try feed.update(db)
                return (feed, existing.deletedAt != nil)
            }
            try feed.insert(db)
            return (feed, true)
        }
    }

    public func feed(applicationId: String, feedId: String) async throws -> FeedRecord? {
        try await read { db in try Self.feed(db, applicationId: applicationId, feedId: feedId) }
    }

    public func feeds(applicationId: String) async throws -> [FeedRecord] {
        try await read { db in
            try FeedRecord.filter { $0.applicationId == applicationId && $0.deletedAt == nil }.order(\.feedId).fetchAll(db)
        }
    }

    public func deleteFeed(applicationId: String, feedId: String, at date: Date) async throws -> Bool {
        try await write { db in
            guard var feed = try Self.feed(db, applicationId: applicationId, feedId: feedId), feed.deletedAt == nil else { return false }
            feed.deletedAt = date
            feed.updatedAt = date
            try feed.update(db)
            let live = try EpisodeRecord
                .filter { $0.applicationId == applicationId && $0.feedId == feedId && $0.retractedAt == nil }
                .fetchAll(db)
            for var episode in live {
                episode.retractedAt = date
                episode.updatedAt = date
                try episode.update(db)
                try Self.appendChange(db, EpisodeWrite(record: episode, kind: .retracted))
            }
            return true
        }
    }

    public func writeEpisodes(
        applicationId: String, feedId: String, assetIds: [String],
        _ plan: @escaping @Sendable ([String: EpisodeRecord]) throws -> [EpisodeWrite]
    ) async throws -> [EpisodeWrite] {
        try await write { db in
            let existing = try EpisodeRecord
                .filter { $0.applicationId == applicationId && $0.feedId == feedId && assetIds.contains($0.assetId) }
                .fetchAll(db)
            let writes = try plan(Dictionary(existing.map { ($0.assetId, $0) }, uniquingKeysWith: { first, _ in first }))
            for var write in writes {
                try write.record.save(db)
                try Self.appendChange(db, write)
            }
            return writes
        }
    }

    public func episode(applicationId: String, feedId: String, assetId: String) async throws -> EpisodeRecord? {
        try await read { db in
            try EpisodeRecord.fetchOne(db, key: ["application_id": applicationId, "feed_id": feedId, "asset_id": assetId])
        }
    }

    public func episodes(
        applicationId: String, updatedSince since: Date, feedIds: [String]?, after: EpisodeKey?, limit: Int
    ) async throws -> [EpisodeRecord] {
        try await read { db in
            var request = EpisodeRecord.filter { $0.applicationId == applicationId && $0.retractedAt == nil && $0.updatedAt >= since }
            if let feedIds { request = request.filter { feedIds.contains($0.feedId) } }
            if let after {
                request = request.filter(sql: "(updated_at, feed_id, asset_id) > (?, ?, ?)", arguments: [after.updatedAt, after.feedId, after.assetId])
            }
            return try request.order { [$0.updatedAt, $0.feedId, $0.assetId] }.limit(limit).fetchAll(db)
        }
    }

    public func subscribe(
        _ subscription: SubscriptionRecord, initialLimit: Int?
    ) async throws -> (SubscriptionRecord, created: Bool, episodes: [EpisodeRecord]) {
        try await write { db in
            var subscription = subscription
            let existing = try SubscriptionRecord.fetchOne(db, key: [
                "application_id": subscription.applicationId, "device_id": subscription.deviceId, "feed_id": subscription.feedId,
            ])
            if let existing {
                subscription.sinceSeq = existing.sinceSeq
                subscription.subscribedAt = existing.subscribedAt
                try subscription.update(db)
            } else {
                subscription.sinceSeq = try Self.latestSeq(db, applicationId: subscription.applicationId)
                try subscription.insert(db)
            }
            let episodes = try Self.liveEpisodes(db, applicationId: subscription.applicationId, feedId: subscription.feedId, limit: initialLimit)
            return (subscription, existing == nil, episodes)
        }
    }

    public func unsubscribe(applicationId: String, deviceId: String, feedId: String) async throws -> Bool {
        try await write { db in
            try SubscriptionRecord.deleteOne(db, key: ["application_id": applicationId, "device_id": deviceId, "feed_id": feedId])
        }
    }

    public func subscriptions(applicationId: String, deviceId: String) async throws -> [SubscriptionRecord] {
        try await read { db in
            try SubscriptionRecord.filter { $0.applicationId == applicationId && $0.deviceId == deviceId }
                .order(\.feedId).fetchAll(db)
        }
    }

    public func subscriberIds(applicationId: String, feedId: String) async throws -> [String] {
        try await read { db in
            try String.fetchAll(db, sql: "SELECT device_id FROM subscriptions WHERE application_id = ? AND feed_id = ?", arguments: [applicationId, feedId])
        }
    }

    public func subscriberCount(applicationId: String, feedId: String) async throws -> Int {
        try await read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM subscriptions WHERE application_id = ? AND feed_id = ?", arguments: [applicationId, feedId]) ?? 0
        }
    }

    public func changes(applicationId: String, deviceId: String, afterSeq: Int64, limit: Int) async throws -> [EpisodeChangeRecord] {
        try await read { db in
            // One index seek per subscribed feed, each bounded by the page size, merged by sequence
            // number: the cost follows the subscriptions and what changed in them, never the size of
            // the catalogue (a join let SQLite walk every change of the application). One read
            // transaction, so every feed is read at the same snapshot.
            let subscriptions = try SubscriptionRecord
                .filter { $0.applicationId == applicationId && $0.deviceId == deviceId }
                .fetchAll(db)
            var rows: [Row] = []
            for subscription in subscriptions {
                rows += try Row.fetchAll(db, sql: """
                    SELECT seq, feed_id, asset_id, kind, snapshot FROM episode_changes
                    WHERE application_id = ? AND feed_id = ? AND seq > ?
                    ORDER BY seq LIMIT ?
                    """, arguments: [applicationId, subscription.feedId, max(afterSeq, subscription.sinceSeq), limit])
            }
            rows.sort { ($0["seq"] as Int64) < ($1["seq"] as Int64) }
            return try rows.prefix(limit).map { row in
                let snapshot: String? = row["snapshot"]
                return EpisodeChangeRecord(
                    seq: row["seq"], feedId: row["feed_id"], assetId: row["asset_id"],
                    kind: EpisodeChange.Kind(rawValue: row["kind"]),
                    snapshot: try snapshot.map { try StoredJSON.decode(EpisodeRecord.self, $0) })
            }
        }
    }

    public func changeSeq(applicationId: String, legacySeq: Int64) async throws -> Int64 {
        try await read { db in
            try Int64.fetchOne(db, sql: """
                SELECT seq FROM episode_changes
                WHERE application_id = ? AND legacy_seq IS NOT NULL AND legacy_seq <= ?
                ORDER BY legacy_seq DESC LIMIT 1
                """, arguments: [applicationId, legacySeq]) ?? 0
        }
    }

    private static func feed(_ db: Database, applicationId: String, feedId: String) throws -> FeedRecord? {
        try FeedRecord.fetchOne(db, key: ["application_id": applicationId, "feed_id": feedId])
    }

    private static func liveEpisodes(_ db: Database, applicationId: String, feedId: String, limit: Int?) throws -> [EpisodeRecord] {
        var request = EpisodeRecord
            .filter { $0.applicationId == applicationId && $0.feedId == feedId && $0.retractedAt == nil }
            .order { [$0.announcedAt.desc, $0.assetId.desc] }
        if let limit { request = request.limit(limit) }
        return try request.fetchAll(db)
    }

    private static func latestSeq(_ db: Database, applicationId: String) throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT last_seq FROM change_counters WHERE application_id = ?", arguments: [applicationId]) ?? 0
    }

    /// Numbers the change with the application's next sequence number. SQLite has one writer at a
    /// time, so numbers commit in order: a reader never sees N+1 without N.
    private static func appendChange(_ db: Database, _ write: EpisodeWrite) throws {
        let snapshot = write.kind == .retracted ? nil : try StoredJSON.encode(write.record)
        let applicationId = write.record.applicationId
        try db.execute(sql: """
            INSERT INTO change_counters (application_id, last_seq) VALUES (?, 1)
            ON CONFLICT (application_id) DO UPDATE SET last_seq = last_seq + 1
            """, arguments: [applicationId])
        try db.execute(
            sql: """
                INSERT INTO episode_changes (application_id, seq, feed_id, asset_id, kind, snapshot)
                VALUES (?, (SELECT last_seq FROM change_counters WHERE application_id = ?), ?, ?, ?, ?)
                """,
            arguments: [applicationId, applicationId, write.record.feedId, write.record.assetId, write.kind.rawValue, snapshot])
    }
}
