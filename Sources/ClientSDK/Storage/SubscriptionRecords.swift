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
