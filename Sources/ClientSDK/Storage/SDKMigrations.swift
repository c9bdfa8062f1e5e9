import Foundation
import GRDB

/// The SDK database's schema, migration by migration, apart from the code that reads and writes it.
extension SDKDatabase {
    /// Shipped migrations never change.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: state records") { db in
            try db.create(table: "state") { t in
                t.primaryKey("name", .text)
                t.column("json", .blob).notNull()
                t.column("updated_at", .datetime).notNull()
            }
        }
        migrator.registerMigration("v2: assets and command outcomes") { db in
            try db.create(table: "assets") { t in
                t.primaryKey("asset_id", .text)
                t.column("relative_path", .text).notNull()
                t.column("size", .integer).notNull()
                t.column("added_at", .datetime).notNull()
            }
            try db.create(table: "command_outcomes") { t in
                t.primaryKey("command_id", .text)
                t.column("type", .text).notNull()
                t.column("outcome", .text).notNull()
                t.column("reason", .text)
                t.column("executed_at", .datetime).notNull()
                t.column("acked_at", .datetime)
            }
        }
        migrator.registerMigration("v3: subscription items") { db in
            try db.create(table: "subscription_items") { t in
                t.primaryKey("asset_id", .text)
                t.column("feed_id", .text).notNull()
                t.column("metadata", .blob).notNull()
                t.column("state", .text).notNull()
                t.column("via_subscription", .boolean).notNull()
                t.column("added_at", .datetime).notNull()
                t.column("updated_at", .datetime).notNull()
            }
            try db.create(index: "subscription_items_by_feed", on: "subscription_items", columns: ["feed_id", "added_at"])
        }
        migrator.registerMigration("v4: event queue") { db in
            try db.create(table: "event_queue") { t in
                t.primaryKey("sequence", .integer)
                t.column("json", .blob).notNull()
                t.column("logged_at", .datetime).notNull()
            }
            // One row: the next sequence number. Kept apart from the queue, which empties.
            try db.create(table: "event_sequence") { t in
                t.primaryKey("id", .integer).check { $0 == 1 }
                t.column("next", .integer).notNull()
            }
        }
        migrator.registerMigration("v5: download queue") { db in
            try db.create(table: "downloads") { t in
                t.primaryKey("asset_id", .text)
                t.column("position", .integer).notNull()
                t.column("request", .blob).notNull()
                t.column("paused", .boolean).notNull().defaults(to: false)
                t.column("failed", .boolean).notNull().defaults(to: false)
                t.column("error_count", .integer).notNull().defaults(to: 0)
                t.column("last_failure", .blob)
                t.column("bytes_downloaded", .integer).notNull().defaults(to: 0)
                t.column("expected_bytes", .integer)
                t.column("expected_is_estimate", .boolean).notNull().defaults(to: false)
                t.column("added_at", .datetime).notNull()
            }
            try db.create(index: "downloads_by_position", on: "downloads", columns: ["position"])
            // What a completed download came from; null for files the app copied in.
            try db.alter(table: "assets") { t in t.add(column: "request", .blob) }
        }
        migrator.registerMigration("v6: download grants and their reports") { db in
            // The backplane's grant of a queued or completed download, when it was asked for one.
            try db.alter(table: "downloads") { t in t.add(column: "grant_id", .text) }
            try db.alter(table: "assets") { t in t.add(column: "grant_id", .text) }
            // What became of granted downloads, kept until a sync's answer settles each.
            try db.create(table: "grant_reports") { t in
                t.primaryKey("grant_id", .text)
                t.column("outcome", .text).notNull()
                t.column("recorded_at", .datetime).notNull()
            }
        }
        migrator.registerMigration("v7: rights") { db in
            // The window the backplane granted, and the license the app's provider holds.
            // The backplane's last denial, until a grant replaces it.
            try db.alter(table: "downloads") { t in
                t.add(column: "window", .blob)
                t.add(column: "license", .blob)
                t.add(column: "denial", .blob)
            }
            // Also when the download completed and when it was first played, in trusted time.
            try db.alter(table: "assets") { t in
                t.add(column: "window", .blob)
                t.add(column: "license", .blob)
                t.add(column: "downloaded_at", .datetime)
                t.add(column: "first_played_at", .datetime)
            }
        }
        migrator.registerMigration("v8: first play while downloading") { db in
            // An asset played through the playback server while it downloads starts its expiry
            // after play then; the instant moves to its asset record when it completes.
            try db.alter(table: "downloads") { t in t.add(column: "first_played_at", .datetime) }
        }
        migrator.registerMigration("v9: size estimates") { db in
            // What the asset will take, known before its download starts (`SizeEstimator`).
            try db.alter(table: "downloads") { t in
                t.add(column: "estimated_bytes", .integer)
                // `EstimateBasis`: 0 bandwidth alone, 1 measured from the first files, 2 every size stated.
                t.add(column: "estimate_basis", .integer).notNull().defaults(to: 0)
            }
        }
        migrator.registerMigration("v10: licenses through the backplane") { db in
            // The license each asset holds, as the backplane sent it: the keys still wrapped for
            // the device's agreement key, so they are never at rest in the clear.
            try db.create(table: "backplane_licenses") { t in
                t.primaryKey("asset_id", .text)
                t.column("license_id", .text).notNull()
                t.column("grant_id", .text).notNull()
                t.column("answer", .blob).notNull()
                t.column("expires_at", .datetime)
            }
            // Releases of deleted assets' licenses, sent until the backplane acknowledges them.
            try db.create(table: "license_releases") { t in
                t.primaryKey("license_id", .text)
                t.column("kids", .text).notNull()
                t.column("queued_at", .datetime).notNull()
            }
        }
        return migrator
    }
}
