import Foundation
import GRDB
import BackplaneWire

// The SQLite store's schema: its migrations and the event table's SQL. The records' mapping to
// the tables is in SQLiteRecords.swift; the queries are in the SQLiteStore+… files.

extension SQLiteStore {
    /// Shipped migrations never change; a new schema step is a new migration.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: applications, keys, tokens, nonces, devices") { db in
            try db.create(table: "applications") { t in
                t.primaryKey("id", .text)
                t.column("name", .text).notNull()
                t.column("settings", .text).notNull()
                t.column("created_at", .datetime).notNull()
            }
            try db.create(table: "app_keys") { t in
                t.primaryKey("key_id", .text)
                t.column("application_id", .text).notNull().references("applications", onDelete: .cascade)
                t.column("secret", .text).notNull()
                t.column("created_at", .datetime).notNull()
                t.column("revoked_at", .datetime)
            }
            try db.create(table: "tokens") { t in
                t.primaryKey("id", .text)
                t.column("application_id", .text).notNull().references("applications", onDelete: .cascade)
                t.column("scope", .text).notNull()
                t.column("token_hash", .text).notNull().unique()
                t.column("name", .text).notNull()
                t.column("created_at", .datetime).notNull()
                t.column("revoked_at", .datetime)
            }
            try db.create(table: "nonces", options: .withoutRowID) { t in
                t.column("key_id", .text).notNull()
                t.column("nonce", .text).notNull()
                t.column("expires_at", .datetime).notNull().indexed()
                t.primaryKey(["key_id", "nonce"])
            }
            try db.create(table: "devices") { t in
                t.autoIncrementedPrimaryKey("row_id")
                t.column("application_id", .text).notNull().references("applications", onDelete: .cascade)
                t.column("device_id", .text).notNull()
                t.column("user_id", .text).notNull()
                t.column("external_device_id", .text)
                t.column("nickname", .text)
                t.column("platform", .text).notNull()
                t.column("model", .text)
                t.column("os_version", .text)
                t.column("sdk_version", .text)
                t.column("app_version", .text)
                t.column("push_token", .text)
                t.column("download_enabled", .boolean).notNull()
                t.column("credential_hash", .text).notNull()
                t.column("registered_at", .datetime).notNull()
                t.column("updated_at", .datetime).notNull()
                t.column("last_seen_at", .datetime).notNull()
                t.column("unregistered_at", .datetime)
                t.uniqueKey(["application_id", "device_id"])
            }
            try db.create(index: "devices_by_user", on: "devices", columns: ["application_id", "user_id"])
            try db.create(index: "devices_by_external_id", on: "devices", columns: ["application_id", "external_device_id"])
        }
        migrator.registerMigration("v2: commands") { db in
            try db.create(table: "commands") { t in
                t.autoIncrementedPrimaryKey("row_id")
                t.column("command_id", .text).notNull().unique()
                t.column("application_id", .text).notNull().references("applications", onDelete: .cascade)
                t.column("device_id", .text).notNull()
                t.column("type", .text).notNull()
                t.column("asset_ids", .text)
                t.column("state", .text).notNull()
                t.column("created_at", .datetime).notNull()
                t.column("updated_at", .datetime).notNull()
                t.column("expires_at", .datetime)
                t.column("delivered_at", .datetime)
                t.column("completed_at", .datetime)
                t.column("failure_reason", .text)
                t.column("deferrals", .integer).notNull()
            }
            try db.create(index: "commands_by_device", on: "commands", columns: ["application_id", "device_id", "state"])
        }
        migrator.registerMigration("v3: feeds, episodes, change log, subscriptions") { db in
            try db.create(table: "feeds") { t in
                t.column("application_id", .text).notNull().references("applications", onDelete: .cascade)
                t.column("feed_id", .text).notNull()
                t.column("title", .text).notNull()
                t.column("metadata", .text)
                t.column("created_at", .datetime).notNull()
                t.column("updated_at", .datetime).notNull()
                t.column("deleted_at", .datetime)
                t.primaryKey(["application_id", "feed_id"])
            }
            try db.create(table: "episodes") { t in
                t.column("application_id", .text).notNull()
                t.column("feed_id", .text).notNull()
                t.column("asset_id", .text).notNull()
                t.column("episode", .text).notNull()
                t.column("announced_at", .datetime).notNull()
                t.column("updated_at", .datetime).notNull()
                t.column("retracted_at", .datetime)
                t.primaryKey(["application_id", "feed_id", "asset_id"])
                t.foreignKey(["application_id", "feed_id"], references: "feeds", onDelete: .cascade)
            }
            try db.create(index: "episodes_by_update", on: "episodes", columns: ["application_id", "updated_at", "feed_id", "asset_id"])
            try db.create(index: "episodes_by_announcement", on: "episodes", columns: ["application_id", "feed_id", "announced_at"])
            // The change log: one row per episode write. SQLite commits one writer at a time, so
            // sequence numbers become visible in order; a reader never sees N+1 without N.
            try db.create(table: "episode_changes") { t in
                t.autoIncrementedPrimaryKey("seq")
                t.column("application_id", .text).notNull()
                t.column("feed_id", .text).notNull()
                t.column("asset_id", .text).notNull()
                t.column("kind", .text).notNull()
                t.column("snapshot", .text)
            }
            try db.create(index: "episode_changes_by_feed", on: "episode_changes", columns: ["application_id", "feed_id", "seq"])
            try db.create(table: "subscriptions") { t in
                t.column("application_id", .text).notNull()
                t.column("device_id", .text).notNull()
                t.column("feed_id", .text).notNull()
                t.column("max_items", .integer)
                t.column("autodelete_old_items", .boolean)
                t.column("since_seq", .integer).notNull()
                t.column("subscribed_at", .datetime).notNull()
                t.column("updated_at", .datetime).notNull()
                t.primaryKey(["application_id", "device_id", "feed_id"])
            }
            try db.create(index: "subscriptions_by_feed", on: "subscriptions", columns: ["application_id", "feed_id"])
        }
        migrator.registerMigration("v4: event log") { db in
            // Times are integer milliseconds since 1970 (UTC): compact, exact, cheap to compare.
            try db.execute(sql: EventsSchema.sql)
        }
        migrator.registerMigration("v5: device keys") { db in
            try db.alter(table: "devices") { t in t.add(column: "public_key", .text) }
        }
        migrator.registerMigration("v6: change log numbered per application") { db in
            try db.execute(sql: ChangeLogPerApplication.sql)
        }
        migrator.registerMigration("v7: download grants, entitlement keys") { db in
            try db.create(table: "download_grants") { t in
                t.autoIncrementedPrimaryKey("row_id")
                t.column("grant_id", .text).notNull().unique()
                t.column("application_id", .text).notNull().references("applications", onDelete: .cascade)
                t.column("user_id", .text).notNull()
                t.column("device_id", .text).notNull()
                t.column("asset_id", .text).notNull()
                t.column("state", .text).notNull()
                t.column("counts_for_lifetime", .boolean).notNull()
                t.column("window", .text).notNull()
                t.column("granted_at", .datetime).notNull()
                t.column("updated_at", .datetime).notNull()
            }
            // The permission's counts (per user and asset, per user, per device) and the admin lists.
            try db.create(index: "download_grants_by_user_asset", on: "download_grants", columns: ["application_id", "user_id", "asset_id", "state"])
            try db.create(index: "download_grants_by_user", on: "download_grants", columns: ["application_id", "user_id", "state"])
            try db.create(index: "download_grants_by_device", on: "download_grants", columns: ["application_id", "device_id", "state"])
            try db.create(table: "entitlement_keys") { t in
                t.primaryKey("key_id", .text)
                t.column("application_id", .text).notNull().references("applications", onDelete: .cascade)
                t.column("private_key", .blob).notNull()
                t.column("created_at", .datetime).notNull()
                t.column("retired_at", .datetime)
            }
        }
        migrator.registerMigration("v8: asset policies") { db in
            try db.create(table: "asset_policies") { t in
                t.column("application_id", .text).notNull().references("applications", onDelete: .cascade)
                t.column("asset_id", .text).notNull()
                t.column("policy", .text).notNull()
                t.column("updated_at", .datetime).notNull()
                t.primaryKey(["application_id", "asset_id"])
            }
            // A permission looks up the asset's episode whichever feed carries it.
            try db.create(index: "episodes_by_asset", on: "episodes", columns: ["application_id", "asset_id", "updated_at"])
        }
        migrator.registerMigration("v9: an index in page order for every list filter") { db in
            try db.execute(sql: ListIndexes.sql)
        }
        migrator.registerMigration("v10: token expiry, last use of keys and tokens") { db in
            try db.execute(sql: CredentialLifetimes.sql)
        }
        migrator.registerMigration("v11: console indexes (command lists, find by nickname)") { db in
            try db.execute(sql: ConsoleIndexes.statements.map { $0 + ";" }.joined(separator: "\n"))
        }
        migrator.registerMigration("v12: nonce lease") { db in
            // One row: signed timestamps before it may be spent in memory alone (`SpentNonces`).
            try db.execute(sql: "CREATE TABLE nonce_lease (id INTEGER PRIMARY KEY CHECK (id = 1), accepts_before INTEGER NOT NULL)")
        }
        migrator.registerMigration("v13: user identity (user tokens)") { db in
            try db.create(table: "user_identities") { t in
                t.primaryKey("application_id", .text).references("applications", onDelete: .cascade)
                t.column("required", .boolean).notNull()
                t.column("issuer", .text).notNull()
                t.column("audience", .text).notNull()
                t.column("jwks", .text)
                t.column("jwks_url", .text)
                t.column("hs256_secret", .text)
                t.column("updated_at", .datetime).notNull()
            }
        }
        migrator.registerMigration("v14: push credentials, each device's last push, its push provider") { db in
            try db.execute(sql: PushTables.sqlite)
        }
        migrator.registerMigration("v15: user tokens bound to the device they registered") { db in
            try db.execute(sql: UserTokenUses.sqlite)
        }
        migrator.registerMigration("v16: content keys") { db in
            try db.execute(sql: ContentKeyTables.sqlite)
        }
        migrator.registerMigration("v17: agreement keys, licenses") { db in
            try db.execute(sql: LicenseTables.sqlite)
        }
        migrator.registerMigration("v18: license servers") { db in
            try db.execute(sql: LicenseServerTables.sqlite)
        }
        return migrator
    }
}

/// Migration v6: the change log was numbered across all applications, so a device's cursor
/// jumped with other tenants' CMS activity. Each application now numbers its own changes from 1
/// (the next number lives in `change_counters`, so a number is never reused). Existing rows are
/// renumbered in their old order and keep their old number in `legacy_seq`: a device still
/// holding a cursor issued before the migration (`c1:`) is translated through it, and each
/// subscription's starting point is converted the same way. Never edit once shipped.
enum ChangeLogPerApplication {
    static let sql = """
        CREATE TABLE change_counters (
            application_id TEXT PRIMARY KEY,
            last_seq INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE episode_changes_per_application (
            application_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            feed_id TEXT NOT NULL,
            asset_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            snapshot TEXT,
            legacy_seq INTEGER,
            PRIMARY KEY (application_id, seq)
        );
        INSERT INTO episode_changes_per_application (application_id, seq, feed_id, asset_id, kind, snapshot, legacy_seq)
            SELECT application_id, ROW_NUMBER() OVER (PARTITION BY application_id ORDER BY seq), feed_id, asset_id, kind, snapshot, seq
            FROM episode_changes;
        INSERT INTO change_counters (application_id, last_seq)
            SELECT application_id, MAX(seq) FROM episode_changes_per_application GROUP BY application_id;
        CREATE INDEX episode_changes_by_legacy_seq ON episode_changes_per_application (application_id, legacy_seq)
            WHERE legacy_seq IS NOT NULL;
        UPDATE subscriptions SET since_seq = COALESCE((
            SELECT c.seq FROM episode_changes_per_application c
            WHERE c.application_id = subscriptions.application_id AND c.legacy_seq IS NOT NULL AND c.legacy_seq <= subscriptions.since_seq
            ORDER BY c.legacy_seq DESC LIMIT 1), 0);
        DROP TABLE episode_changes;
        ALTER TABLE episode_changes_per_application RENAME TO episode_changes;
        CREATE INDEX episode_changes_by_feed ON episode_changes (application_id, feed_id, seq);
        """
}

/// The event log's tables. One flat row per event (no JSON): every field is a column the
/// reporting API can filter or export, and ingestion is one prepared INSERT per event.
/// `benchmarks/ingest` reads this schema from a served database for its baseline. Migration v4
/// runs `sql` as it is: never edit it once shipped; a schema change is a new migration.
enum EventsSchema {
    static let sql = """
        CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            application_id TEXT NOT NULL,
            device_id TEXT NOT NULL,
            sequence INTEGER NOT NULL,
            event_id TEXT NOT NULL,
            type TEXT NOT NULL,
            device_time INTEGER NOT NULL,
            received_at INTEGER NOT NULL,
            corrected_time INTEGER NOT NULL,
            user_id TEXT NOT NULL,
            external_device_id TEXT,
            app_state TEXT,
            platform TEXT,
            sdk_version TEXT,
            app_version TEXT,
            asset_id TEXT,
            deletion_reason TEXT,
            reset_type TEXT,
            limit_type TEXT,
            bitrate INTEGER,
            duration_seconds REAL,
            error_code TEXT,
            error_message TEXT,
            custom_name TEXT,
            custom_string TEXT,
            custom_number REAL
        );
        CREATE UNIQUE INDEX events_by_device ON events (application_id, device_id, sequence);
        CREATE INDEX events_by_time ON events (application_id, corrected_time);
        CREATE INDEX events_by_user ON events (application_id, user_id, corrected_time);
        CREATE INDEX events_by_asset ON events (application_id, asset_id, corrected_time);
        CREATE TABLE event_floors (
            application_id TEXT NOT NULL,
            device_id TEXT NOT NULL,
            deleted_through INTEGER NOT NULL,
            PRIMARY KEY (application_id, device_id)
        ) WITHOUT ROWID;
        """

    static let insert = """
        INSERT INTO events (
            application_id, device_id, sequence, event_id, type, device_time, received_at, corrected_time,
            user_id, external_device_id, app_state, platform, sdk_version, app_version,
            asset_id, deletion_reason, reset_type, limit_type, bitrate, duration_seconds, error_code, error_message,
            custom_name, custom_string, custom_number
        ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (application_id, device_id, sequence) DO NOTHING
        """
}

/// Migration v9: every list page the admin and reporting routes serve reads an index whose
/// order is the page's order, searched by the page's filter, so a page costs the same in a
/// fleet of a thousand devices as in one of a million. Before, the device list without a
/// filter was served by the external-id index and sorted the whole fleet in a temporary
/// B-tree, the grant lists sorted all their matches the same way, and the event lists of a
/// type or a device walked the application's events in time order checking each row. An
/// index on (application, column) holds the row id last, so rows with one value come in
/// row-id order. The default device list checks `unregistered_at` row by row: an index that
/// searched it too won SQLite's choice for a user's own devices as well, and read all the
/// registered devices of the application to find the user's. Never edit once shipped.
enum ListIndexes {
    static let sql = """
        CREATE INDEX devices_by_application ON devices (application_id);
        CREATE INDEX download_grants_by_application ON download_grants (application_id);
        CREATE INDEX download_grants_by_user_row ON download_grants (application_id, user_id);
        CREATE INDEX download_grants_by_device_row ON download_grants (application_id, device_id);
        CREATE INDEX events_by_type ON events (application_id, type, corrected_time);
        CREATE INDEX events_by_device_time ON events (application_id, device_id, corrected_time);
        CREATE INDEX commands_by_device_row ON commands (application_id, device_id);
        """
}

/// Migration v10 (and PostgreSQL's 2, the same statements): tokens may expire; app keys and
/// tokens show when they were last used; a token list reads an application's tokens in order.
/// Never edit once shipped.
enum CredentialLifetimes {
    /// `time` is the store's column type for a point in time.
    static func statements(time: String) -> [String] {
        [
            "ALTER TABLE tokens ADD COLUMN expires_at \(time)",
            "ALTER TABLE tokens ADD COLUMN last_used_at \(time)",
            "ALTER TABLE app_keys ADD COLUMN last_used_at \(time)",
            "CREATE INDEX tokens_by_application ON tokens (application_id, created_at, id)",
        ]
    }

    static var sql: String { statements(time: "DATETIME").map { $0 + ";" }.joined(separator: "\n") }
}

/// Migration v11 (and PostgreSQL's 3, the same statements): the application-wide command list
/// (`GET /v1/admin/commands`, the console's commands page) goes newest first, filtered by state,
/// type, both or neither, and each has an index in that order; the console's find looks devices
/// up by nickname. The row id is named last so that PostgreSQL's indexes are in page order too
/// (SQLite's hold it anyway). The open commands by expiry serve `CommandExpirySweep`, which marks
/// them expired without reading the finished ones. Never edit once shipped.
enum ConsoleIndexes {
    static let statements = [
        "CREATE INDEX commands_open_by_expiry ON commands (expires_at) WHERE state IN ('pending', 'delivered')",
        "CREATE INDEX commands_by_application ON commands (application_id, row_id)",
        "CREATE INDEX commands_by_state ON commands (application_id, state, row_id)",
        "CREATE INDEX commands_by_type ON commands (application_id, type, row_id)",
        "CREATE INDEX commands_by_state_type ON commands (application_id, state, type, row_id)",
        "CREATE INDEX devices_by_nickname ON devices (application_id, nickname, row_id)",
    ]
}
