import Foundation
import GRDB
import BackplaneWire

/// The items that subscriptions (and the app) put on the device: one row per asset.
extension SDKDatabase {
    func item(assetId: String) throws -> SubscriptionItem? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM subscription_items WHERE asset_id = ?", arguments: [assetId]).map(Self.item)
        }
    }

    /// Items of a feed (all feeds when nil), oldest first.
    func items(feedId: String?) throws -> [SubscriptionItem] {
        try read { db in
            let rows = try feedId.map {
                try Row.fetchAll(db, sql: "SELECT * FROM subscription_items WHERE feed_id = ? ORDER BY added_at, asset_id", arguments: [$0])
            } ?? Row.fetchAll(db, sql: "SELECT * FROM subscription_items ORDER BY added_at, asset_id")
            return try rows.map(Self.item)
        }
    }

    func saveItem(_ item: SubscriptionItem) throws {
        let metadata = try Self.encoder.encode(item.metadata)
        try write { db in try Self.saveItem(item, metadata: metadata, db) }
    }

    static func saveItem(_ item: SubscriptionItem, metadata: Data, _ db: Database) throws {
        try db.execute(sql: """
            INSERT INTO subscription_items (asset_id, feed_id, metadata, state, via_subscription, added_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(asset_id) DO UPDATE SET feed_id = excluded.feed_id, metadata = excluded.metadata, state = excluded.state,
              via_subscription = excluded.via_subscription, updated_at = excluded.updated_at
            """, arguments: [item.assetId, item.feedId, metadata, item.state.rawValue, item.viaSubscription, item.addedAt, Date()])
    }

    func deleteItem(assetId: String) throws {
        try write { db in try db.execute(sql: "DELETE FROM subscription_items WHERE asset_id = ?", arguments: [assetId]) }
    }

    static func item(_ row: Row) throws -> SubscriptionItem {
        try SubscriptionItem(
            assetId: row.decode(forColumn: "asset_id"), feedId: row.decode(forColumn: "feed_id"),
            metadata: try decoder.decode(EpisodeInput.self, from: row.decode(Data.self, forColumn: "metadata")),
            state: SubscriptionItem.State(rawValue: row.decode(forColumn: "state")) ?? .queued,
            viaSubscription: row.decode(forColumn: "via_subscription"), addedAt: row.decode(forColumn: "added_at"))
    }
}

/// Subscription items and the downloads they stand for, squared in one transaction each.
extension SDKDatabase {
    /// Squares the subscription items with the downloads: queued items whose asset is on the
    /// device become `downloaded`; returns the queued items the download queue does not hold,
    /// oldest first (one query, however many items the feeds hold).
    func reconcileSubscriptionItems() throws -> [SubscriptionItem] {
        try write { db in
            try db.execute(sql: """
                UPDATE subscription_items SET state = ? WHERE state = ? AND asset_id IN (SELECT asset_id FROM assets)
                """, arguments: [SubscriptionItem.State.downloaded.rawValue, SubscriptionItem.State.queued.rawValue])
            return try Row.fetchAll(db, sql: """
                SELECT * FROM subscription_items WHERE state = ?
                  AND asset_id NOT IN (SELECT asset_id FROM downloads) AND asset_id NOT IN (SELECT asset_id FROM assets)
                ORDER BY added_at, asset_id
                """, arguments: [SubscriptionItem.State.queued.rawValue]).map(Self.item)
        }
    }

    /// What `trackItem` did.
    enum Tracking {
        case tracked(SubscriptionItem)
        /// Neither queued nor downloaded.
        case unknownAsset
        /// Another feed holds the asset's item.
        case trackedBy(feedId: String)
    }

    /// Makes an asset the app queued or downloaded itself count toward `feedId`'s quota: a new
    /// item, `downloaded` or `queued` as the asset is (or its existing item in that feed, made a
    /// counting one in that state, whatever the feed had made of it).
    /// Looked up and written in one transaction, so that a download completing meanwhile cannot
    /// leave a `queued` item behind.
    func trackItem(assetId: String, feedId: String) throws -> Tracking {
        try write { db in
            // The item is `downloaded` or `queued` as the asset's download is.
            let present: (state: SubscriptionItem.State, request: DownloadRequest?)?
            if let asset = try Self.fetchAssets(db, where: assetId).first {
                present = (.downloaded, asset.request)
            } else if let queued = try Self.fetchQueue(db, assetId: assetId).first {
                present = (.queued, queued.request)
            } else {
                present = nil
            }
            let existing = try Row.fetchOne(db, sql: "SELECT * FROM subscription_items WHERE asset_id = ?", arguments: [assetId]).map(Self.item)
            if let existing, existing.feedId != feedId { return .trackedBy(feedId: existing.feedId) }
            guard let present else { return .unknownAsset }
            if var existing {
                // An item the feed reset or deferred counts again once the app queues its asset.
                guard !existing.viaSubscription || existing.state != present.state else { return .tracked(existing) }
                existing.viaSubscription = true
                existing.state = present.state
                try Self.saveItem(existing, metadata: try Self.encoder.encode(existing.metadata), db)
                return .tracked(existing)
            }
            let item = SubscriptionItem(
                assetId: assetId, feedId: feedId, metadata: present.request?.episode ?? EpisodeInput(assetId: assetId),
                state: present.state, viaSubscription: true, addedAt: Date())
            try Self.saveItem(item, metadata: try Self.encoder.encode(item.metadata), db)
            return .tracked(item)
        }
    }
}
