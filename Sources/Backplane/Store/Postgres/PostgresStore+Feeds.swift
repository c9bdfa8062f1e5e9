import Foundation
import PostgresNIO
import BackplaneWire

/// Feeds, episodes, their change log and the subscriptions that read it.
///
/// The change log is numbered in commit order: every transaction that appends to it (or records
/// a subscription's starting point) first locks the application's `change_counters` row and
/// holds it to commit. Publishers of one application therefore commit one after another, and a
/// reader that sees change N+1 has seen N. The price is that publishing within one application
/// is serial across nodes; reads never wait.
extension PostgresStore {
    public func upsertFeed(_ feed: FeedRecord) async throws -> (FeedRecord, created: Bool) {
        let metadata = try StoredJSON.encode(feed.metadata)
        return try await transaction { [logger] connection in
            let inserted = try await connection.rows("""
                INSERT INTO feeds (application_id, feed_id, title, metadata, created_at, updated_at, deleted_at)
                VALUES (\(feed.applicationId), \(feed.feedId), \(feed.title), \(metadata)::jsonb, \(feed.createdAt), \(feed.updatedAt),
                        \(feed.deletedAt))
                ON CONFLICT DO NOTHING RETURNING 1
                """, logger: logger)
            if !inserted.isEmpty { return (feed, true) }
            guard let existing = try await Self.feed(connection, applicationId: feed.applicationId, feedId: feed.feedId, locking: true, logger: logger)
            else { throw StoreError.unknownApplication(feed.applicationId) }
            var feed = feed
            feed.createdAt = existing.createdAt
            try await connection.run("""
                UPDATE feeds SET title = \(feed.title), metadata = \(metadata)::jsonb, updated_at = \(feed.updatedAt), deleted_at = \(feed.deletedAt)
                WHERE application_id = \(feed.applicationId) AND feed_id = \(feed.feedId)
                """, logger: logger)
            return (feed, existing.deletedAt != nil)
        }
    }

    public func feed(applicationId: String, feedId: String) async throws -> FeedRecord? {
        try await connection { [logger] connection in
            try await Self.feed(connection, applicationId: applicationId, feedId: feedId, locking: false, logger: logger)
        }
    }

    public func feeds(applicationId: String) async throws -> [FeedRecord] {
        try await rows("""
            SELECT \(unescaped: PostgresColumns.feed) FROM feeds WHERE application_id = \(applicationId) AND deleted_at IS NULL ORDER BY feed_id
            """).records(FeedRecord.init)
    }

    public func deleteFeed(applicationId: String, feedId: String, at date: Date) async throws -> Bool {
        try await transaction { [logger] connection in
            var next = try await Self.lockChangeLog(connection, applicationId: applicationId, logger: logger)
            guard let feed = try await Self.feed(connection, applicationId: applicationId, feedId: feedId, locking: true, logger: logger),
                  feed.deletedAt == nil
            else { return false }
            try await connection.run(
                "UPDATE feeds SET deleted_at = \(date), updated_at = \(date) WHERE application_id = \(applicationId) AND feed_id = \(feedId)",
                logger: logger)
            let live = try await connection.rows("""
                UPDATE episodes SET retracted_at = \(date), updated_at = \(date)
                WHERE application_id = \(applicationId) AND feed_id = \(feedId) AND retracted_at IS NULL
                RETURNING \(unescaped: PostgresColumns.episode)
                """, logger: logger).records(EpisodeRecord.init)
            // In asset order, so the numbering does not depend on the order rows were updated in.
            for episode in live.sorted(by: { $0.assetId < $1.assetId }) {
                try await Self.appendChange(connection, EpisodeWrite(record: episode, kind: .retracted), seq: &next, logger: logger)
            }
            try await Self.saveChangeCounter(connection, applicationId: applicationId, next: next, logger: logger)
            return true
        }
    }

    public func writeEpisodes(
        applicationId: String, feedId: String, assetIds: [String],
        _ plan: @escaping @Sendable ([String: EpisodeRecord]) throws -> [EpisodeWrite]
    ) async throws -> [EpisodeWrite] {
        try await transaction { [logger] connection in
            var next = try await Self.lockChangeLog(connection, applicationId: applicationId, logger: logger)
            let existing = try await connection.rows("""
                SELECT \(unescaped: PostgresColumns.episode) FROM episodes
                WHERE application_id = \(applicationId) AND feed_id = \(feedId) AND asset_id = ANY(\(assetIds))
                """, logger: logger).records(EpisodeRecord.init)
            let writes = try plan(Dictionary(existing.map { ($0.assetId, $0) }, uniquingKeysWith: { first, _ in first }))
            for write in writes {
                let e = write.record
                let episode = try StoredJSON.encode(e.episode)
                try await connection.run("""
                    INSERT INTO episodes (application_id, feed_id, asset_id, episode, announced_at, updated_at, retracted_at)
                    VALUES (\(e.applicationId), \(e.feedId), \(e.assetId), \(episode)::jsonb, \(e.announcedAt), \(e.updatedAt), \(e.retractedAt))
                    ON CONFLICT (application_id, feed_id, asset_id) DO UPDATE SET
                        episode = excluded.episode, announced_at = excluded.announced_at, updated_at = excluded.updated_at,
                        retracted_at = excluded.retracted_at
                    """, logger: logger)
                try await Self.appendChange(connection, write, seq: &next, logger: logger)
            }
            try await Self.saveChangeCounter(connection, applicationId: applicationId, next: next, logger: logger)
            return writes
        }
    }

    public func episode(applicationId: String, feedId: String, assetId: String) async throws -> EpisodeRecord? {
        try await rows("""
            SELECT \(unescaped: PostgresColumns.episode) FROM episodes
            WHERE application_id = \(applicationId) AND feed_id = \(feedId) AND asset_id = \(assetId)
            """).records(EpisodeRecord.init).first
    }

    public func episodes(
        applicationId: String, updatedSince since: Date, feedIds: [String]?, after: EpisodeKey?, limit: Int
    ) async throws -> [EpisodeRecord] {
        // With no `after`, a key below every real one: the empty string sorts first.
        let after = after ?? EpisodeKey(updatedAt: since, feedId: "", assetId: "")
        return try await rows("""
            SELECT \(unescaped: PostgresColumns.episode) FROM episodes
            WHERE application_id = \(applicationId) AND retracted_at IS NULL AND updated_at >= \(since)
              AND (\(feedIds)::text[] IS NULL OR feed_id = ANY(\(feedIds)))
              AND (updated_at, feed_id, asset_id) > (\(after.updatedAt), \(after.feedId), \(after.assetId))
            ORDER BY updated_at, feed_id, asset_id LIMIT \(limit)
            """).records(EpisodeRecord.init)
    }

    public func subscribe(
        _ subscription: SubscriptionRecord, initialLimit: Int?
    ) async throws -> (SubscriptionRecord, created: Bool, episodes: [EpisodeRecord]) {
        try await transaction { [logger] connection in
            var subscription = subscription
            let s = subscription
            // Locked: no change commits between the starting point and the episodes read below.
            let latest = try await Self.lockChangeLog(connection, applicationId: s.applicationId, logger: logger) - 1
            let existing = try await connection.rows("""
                SELECT \(unescaped: PostgresColumns.subscription) FROM subscriptions
                WHERE application_id = \(s.applicationId) AND device_id = \(s.deviceId) AND feed_id = \(s.feedId) FOR UPDATE
                """, logger: logger).records(SubscriptionRecord.init).first
            if let existing {
                subscription.sinceSeq = existing.sinceSeq
                subscription.subscribedAt = existing.subscribedAt
                try await connection.run("""
                    UPDATE subscriptions SET max_items = \(s.maxItems), autodelete_old_items = \(s.autodeleteOldItems),
                        updated_at = \(s.updatedAt)
                    WHERE application_id = \(s.applicationId) AND device_id = \(s.deviceId) AND feed_id = \(s.feedId)
                    """, logger: logger)
            } else {
                subscription.sinceSeq = latest
                try await connection.run("""
                    INSERT INTO subscriptions (
                        application_id, device_id, feed_id, max_items, autodelete_old_items, since_seq, subscribed_at, updated_at)
                    VALUES (\(s.applicationId), \(s.deviceId), \(s.feedId), \(s.maxItems), \(s.autodeleteOldItems), \(latest),
                            \(s.subscribedAt), \(s.updatedAt))
                    """, logger: logger)
            }
            let episodes = try await connection.rows("""
                SELECT \(unescaped: PostgresColumns.episode) FROM episodes
                WHERE application_id = \(s.applicationId) AND feed_id = \(s.feedId) AND retracted_at IS NULL
                ORDER BY announced_at DESC, asset_id DESC LIMIT \(initialLimit)
                """, logger: logger).records(EpisodeRecord.init)
            return (subscription, existing == nil, episodes)
        }
    }

    public func unsubscribe(applicationId: String, deviceId: String, feedId: String) async throws -> Bool {
        try await !rows("""
            DELETE FROM subscriptions WHERE application_id = \(applicationId) AND device_id = \(deviceId) AND feed_id = \(feedId) RETURNING 1
            """).isEmpty
    }

    public func subscriptions(applicationId: String, deviceId: String) async throws -> [SubscriptionRecord] {
        try await rows("""
            SELECT \(unescaped: PostgresColumns.subscription) FROM subscriptions
            WHERE application_id = \(applicationId) AND device_id = \(deviceId) ORDER BY feed_id
            """).records(SubscriptionRecord.init)
    }

    public func subscriberIds(applicationId: String, feedId: String) async throws -> [String] {
        try await rows("SELECT device_id FROM subscriptions WHERE application_id = \(applicationId) AND feed_id = \(feedId)")
            .map { try $0.decode(String.self) }
    }

    public func subscriberCount(applicationId: String, feedId: String) async throws -> Int {
        let row = try await rows("SELECT COUNT(*) FROM subscriptions WHERE application_id = \(applicationId) AND feed_id = \(feedId)").first
        return Int(try row?.decode(Int64.self) ?? 0)
    }

    public func changes(applicationId: String, deviceId: String, afterSeq: Int64, limit: Int) async throws -> [EpisodeChangeRecord] {
        // One statement, so one snapshot for every feed: read feed by feed in separate statements, a
        // later feed could show a change committed after an earlier feed was read, and the cursor
        // would pass the earlier feed's newer change unseen. Per feed, an index seek bounded by the
        // page size, as in the SQLite store.
        try await rows("""
            SELECT c.seq, c.feed_id, c.asset_id, c.kind, c.snapshot::text AS snapshot
            FROM subscriptions s CROSS JOIN LATERAL (
                SELECT seq, feed_id, asset_id, kind, snapshot FROM episode_changes
                WHERE application_id = s.application_id AND feed_id = s.feed_id AND seq > GREATEST(\(afterSeq), s.since_seq)
                ORDER BY seq LIMIT \(limit)) c
            WHERE s.application_id = \(applicationId) AND s.device_id = \(deviceId)
            ORDER BY c.seq LIMIT \(limit)
            """).records { row in
            EpisodeChangeRecord(
                seq: try row("seq"), feedId: try row("feed_id"), assetId: try row("asset_id"),
                kind: EpisodeChange.Kind(rawValue: try row("kind")),
                snapshot: try row.json("snapshot", as: EpisodeRecord?.self))
        }
    }

    public func changeSeq(applicationId: String, legacySeq: Int64) async throws -> Int64 {
        try await rows("""
            SELECT seq FROM episode_changes WHERE application_id = \(applicationId) AND legacy_seq IS NOT NULL AND legacy_seq <= \(legacySeq)
            ORDER BY legacy_seq DESC LIMIT 1
            """).first?.decode(Int64.self) ?? 0
    }

    private static func feed(
        _ connection: PostgresConnection, applicationId: String, feedId: String, locking: Bool, logger: Logger
    ) async throws -> FeedRecord? {
        try await connection.rows("""
            SELECT \(unescaped: PostgresColumns.feed) FROM feeds WHERE application_id = \(applicationId) AND feed_id = \(feedId)
            \(unescaped: locking ? "FOR UPDATE" : "")
            """, logger: logger).records(FeedRecord.init).first
    }

    /// Locks the application's change counter until commit and returns the next number.
    private static func lockChangeLog(_ connection: PostgresConnection, applicationId: String, logger: Logger) async throws -> Int64 {
        let rows = try await connection.rows("""
            INSERT INTO change_counters (application_id, last_seq) VALUES (\(applicationId), 0)
            ON CONFLICT (application_id) DO UPDATE SET last_seq = change_counters.last_seq
            RETURNING last_seq
            """, logger: logger)
        return try (rows.first?.decode(Int64.self) ?? 0) + 1
    }

    private static func saveChangeCounter(_ connection: PostgresConnection, applicationId: String, next: Int64, logger: Logger) async throws {
        try await connection.run("UPDATE change_counters SET last_seq = \(next - 1) WHERE application_id = \(applicationId)", logger: logger)
    }

    /// Appends the change with number `seq` and moves `seq` on.
    private static func appendChange(_ connection: PostgresConnection, _ write: EpisodeWrite, seq: inout Int64, logger: Logger) async throws {
        let snapshot = write.kind == .retracted ? nil : try StoredJSON.encode(write.record)
        try await connection.run("""
            INSERT INTO episode_changes (application_id, seq, feed_id, asset_id, kind, snapshot)
            VALUES (\(write.record.applicationId), \(seq), \(write.record.feedId), \(write.record.assetId), \(write.kind.rawValue),
                    \(snapshot)::jsonb)
            """, logger: logger)
        seq += 1
    }
}
