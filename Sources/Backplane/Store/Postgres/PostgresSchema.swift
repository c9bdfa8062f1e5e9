import Foundation
import Logging
import PostgresNIO

// The PostgreSQL store's schema and its migrations. The tables mirror the SQLite store's, as of
// its migration v9, so that rows can move across unchanged; types are PostgreSQL's own (jsonb,
// text[], identity columns). Two choices keep the stores alike: times are `timestamptz(3)`,
// milliseconds as SQLite stores them (a cursor holding a time then finds its row again exactly),
// and text compares byte by byte (`COLLATE "C"`, SQLite's order, whatever the database's
// locale). Event times stay integer milliseconds, as in SQLite.

extension PostgresStore {
    /// Shipped migrations never change; a new schema step is a new entry. Each runs in its own
    /// transaction with the row that records it.
    static let migrations: [(version: Int, name: String, statements: [String])] = [
        (1, "the schema of SQLite migration v9", PostgresSchemaV1.statements),
        (2, "SQLite migration v10: token expiry, last use of keys and tokens", CredentialLifetimes.statements(time: "timestamptz(3)")),
        (3, "SQLite migration v11: console indexes", ConsoleIndexes.statements),
        // Filled only by copy-data, with the SQLite server's last lease: timestamps before it
        // are refused, as that server would have after a restart (it spent nonces in memory).
        (4, "SQLite migration v12: nonce lease", [
            "CREATE TABLE nonce_lease (id integer PRIMARY KEY CHECK (id = 1), accepts_before bigint NOT NULL)",
        ]),
        (5, "SQLite migration v13: user identity", [
            """
            CREATE TABLE user_identities (
                application_id text COLLATE "C" PRIMARY KEY REFERENCES applications ON DELETE CASCADE, required boolean NOT NULL,
                issuer text COLLATE "C" NOT NULL, audience text COLLATE "C" NOT NULL, jwks text, jwks_url text, hs256_secret text,
                updated_at timestamptz(3) NOT NULL)
            """,
        ]),
        (6, "SQLite migration v14: push credentials, each device's last push, its push provider", PushTables.postgres),
        (7, "SQLite migration v15: user tokens bound to the device they registered", UserTokenUses.postgres),
        (8, "SQLite migration v16: content keys", ContentKeyTables.postgres),
        (9, "SQLite migration v17: agreement keys, licenses", LicenseTables.postgres),
        (10, "SQLite migration v18: license servers", LicenseServerTables.postgres),
    ]

    /// Brings the database to the newest schema. Nodes starting together take turns on the
    /// startup lock: the first migrates, the others then find nothing to do.
    public func migrate() async throws {
        try await exclusively { try await connection(unbounded: true) { [self] connection in try await applyMigrations(connection) } }
    }

    /// Runs `body` while this node holds the nodes' startup lock (a session advisory lock on a
    /// connection of its own): what one node does at startup, migrating or creating the first
    /// application, the others find done rather than do again.
    public func exclusively<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        try await client.withConnection { connection in
            try await connection.run("SELECT pg_advisory_lock(\(Self.startupLock))", logger: logger)
            do {
                let result = try await body()
                try await connection.run("SELECT pg_advisory_unlock(\(Self.startupLock))", logger: logger)
                return result
            } catch {
                _ = try? await connection.run("SELECT pg_advisory_unlock(\(Self.startupLock))", logger: logger)
                throw error
            }
        }
    }

    /// An arbitrary constant, the same in every node: "backplan" in ASCII.
    private static let startupLock: Int64 = 0x6261_636B_706C_616E

    private func applyMigrations(_ connection: PostgresConnection) async throws {
        try await connection.run("""
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
            """, logger: logger)
        let applied = Set(try await connection.rows("SELECT version FROM schema_migrations", logger: logger).map { try $0.decode(Int.self) })
        for migration in Self.migrations where !applied.contains(migration.version) {
            try await connection.run("BEGIN", logger: logger)
            do {
                for statement in migration.statements {
                    try await connection.run(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.run(
                    "INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))", logger: logger)
                try await connection.run("COMMIT", logger: logger)
                logger.info("Applied PostgreSQL migration \(migration.version): \(migration.name)")
            } catch {
                _ = try? await connection.run("ROLLBACK", logger: logger)
                throw error
            }
        }
    }
}

/// The first schema: everything the SQLite store has after its nine migrations.
enum PostgresSchemaV1 {
    static let statements = [
        """
        CREATE TABLE applications (
            id text COLLATE "C" PRIMARY KEY, name text COLLATE "C" NOT NULL, settings jsonb NOT NULL, created_at timestamptz(3) NOT NULL)
        """,
        """
        CREATE TABLE app_keys (
            key_id text COLLATE "C" PRIMARY KEY, application_id text COLLATE "C" NOT NULL REFERENCES applications ON DELETE CASCADE,
            secret text COLLATE "C" NOT NULL, created_at timestamptz(3) NOT NULL, revoked_at timestamptz(3))
        """,
        "CREATE INDEX app_keys_by_application ON app_keys (application_id, created_at)",
        """
        CREATE TABLE tokens (
            id text COLLATE "C" PRIMARY KEY, application_id text COLLATE "C" NOT NULL REFERENCES applications ON DELETE CASCADE, scope text COLLATE "C" NOT NULL,
            token_hash text COLLATE "C" NOT NULL UNIQUE, name text COLLATE "C" NOT NULL, created_at timestamptz(3) NOT NULL, revoked_at timestamptz(3))
        """,
        """
        CREATE TABLE nonces (
            key_id text COLLATE "C" NOT NULL, nonce text COLLATE "C" NOT NULL, expires_at timestamptz(3) NOT NULL, PRIMARY KEY (key_id, nonce))
        """,
        "CREATE INDEX nonces_by_expiry ON nonces (expires_at)",
        """
        CREATE TABLE devices (
            row_id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            application_id text COLLATE "C" NOT NULL REFERENCES applications ON DELETE CASCADE, device_id text COLLATE "C" NOT NULL,
            user_id text COLLATE "C" NOT NULL, external_device_id text COLLATE "C", nickname text COLLATE "C", platform text COLLATE "C" NOT NULL, model text COLLATE "C", os_version text COLLATE "C",
            sdk_version text COLLATE "C", app_version text COLLATE "C", push_token text COLLATE "C", download_enabled boolean NOT NULL, credential_hash text COLLATE "C" NOT NULL,
            public_key text COLLATE "C", registered_at timestamptz(3) NOT NULL, updated_at timestamptz(3) NOT NULL,
            last_seen_at timestamptz(3) NOT NULL, unregistered_at timestamptz(3),
            UNIQUE (application_id, device_id))
        """,
        "CREATE INDEX devices_by_application ON devices (application_id, row_id)",
        "CREATE INDEX devices_by_user ON devices (application_id, user_id, row_id)",
        "CREATE INDEX devices_by_external_id ON devices (application_id, external_device_id, row_id)",
        """
        CREATE TABLE commands (
            row_id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, command_id text COLLATE "C" NOT NULL UNIQUE,
            application_id text COLLATE "C" NOT NULL REFERENCES applications ON DELETE CASCADE, device_id text COLLATE "C" NOT NULL, type text COLLATE "C" NOT NULL,
            asset_ids text[], state text COLLATE "C" NOT NULL, created_at timestamptz(3) NOT NULL, updated_at timestamptz(3) NOT NULL,
            expires_at timestamptz(3), delivered_at timestamptz(3), completed_at timestamptz(3), failure_reason text COLLATE "C",
            deferrals integer NOT NULL)
        """,
        "CREATE INDEX commands_by_device ON commands (application_id, device_id, row_id)",
        // A sync reads a device's open commands: a partial index holds only those.
        """
        CREATE INDEX commands_open_by_device ON commands (application_id, device_id, row_id)
            WHERE state IN ('pending', 'delivered')
        """,
        """
        CREATE TABLE feeds (
            application_id text COLLATE "C" NOT NULL REFERENCES applications ON DELETE CASCADE, feed_id text COLLATE "C" NOT NULL, title text COLLATE "C" NOT NULL,
            metadata jsonb, created_at timestamptz(3) NOT NULL, updated_at timestamptz(3) NOT NULL, deleted_at timestamptz(3),
            PRIMARY KEY (application_id, feed_id))
        """,
        """
        CREATE TABLE episodes (
            application_id text COLLATE "C" NOT NULL, feed_id text COLLATE "C" NOT NULL, asset_id text COLLATE "C" NOT NULL, episode jsonb NOT NULL,
            announced_at timestamptz(3) NOT NULL, updated_at timestamptz(3) NOT NULL, retracted_at timestamptz(3),
            PRIMARY KEY (application_id, feed_id, asset_id),
            FOREIGN KEY (application_id, feed_id) REFERENCES feeds ON DELETE CASCADE)
        """,
        "CREATE INDEX episodes_by_update ON episodes (application_id, updated_at, feed_id, asset_id)",
        "CREATE INDEX episodes_by_announcement ON episodes (application_id, feed_id, announced_at)",
        "CREATE INDEX episodes_by_asset ON episodes (application_id, asset_id, updated_at)",
        // The next change number of each application. A publishing transaction locks its row
        // first and holds it to commit, so numbers commit in order (PostgresStore).
        #"CREATE TABLE change_counters (application_id text COLLATE "C" PRIMARY KEY, last_seq bigint NOT NULL)"#,
        """
        CREATE TABLE episode_changes (
            application_id text COLLATE "C" NOT NULL, seq bigint NOT NULL, feed_id text COLLATE "C" NOT NULL, asset_id text COLLATE "C" NOT NULL, kind text COLLATE "C" NOT NULL,
            snapshot jsonb, legacy_seq bigint, PRIMARY KEY (application_id, seq))
        """,
        "CREATE INDEX episode_changes_by_feed ON episode_changes (application_id, feed_id, seq)",
        """
        CREATE INDEX episode_changes_by_legacy_seq ON episode_changes (application_id, legacy_seq)
            WHERE legacy_seq IS NOT NULL
        """,
        """
        CREATE TABLE subscriptions (
            application_id text COLLATE "C" NOT NULL, device_id text COLLATE "C" NOT NULL, feed_id text COLLATE "C" NOT NULL, max_items bigint,
            autodelete_old_items boolean, since_seq bigint NOT NULL, subscribed_at timestamptz(3) NOT NULL,
            updated_at timestamptz(3) NOT NULL, PRIMARY KEY (application_id, device_id, feed_id))
        """,
        "CREATE INDEX subscriptions_by_feed ON subscriptions (application_id, feed_id)",
        """
        CREATE TABLE events (
            id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, application_id text COLLATE "C" NOT NULL, device_id text COLLATE "C" NOT NULL,
            sequence bigint NOT NULL, event_id text COLLATE "C" NOT NULL, type text COLLATE "C" NOT NULL, device_time bigint NOT NULL,
            received_at bigint NOT NULL, corrected_time bigint NOT NULL, user_id text COLLATE "C" NOT NULL, external_device_id text COLLATE "C",
            app_state text COLLATE "C", platform text COLLATE "C", sdk_version text COLLATE "C", app_version text COLLATE "C", asset_id text COLLATE "C", deletion_reason text COLLATE "C",
            reset_type text COLLATE "C", limit_type text COLLATE "C", bitrate bigint, duration_seconds double precision, error_code text COLLATE "C",
            error_message text COLLATE "C", custom_name text COLLATE "C", custom_string text COLLATE "C", custom_number double precision)
        """,
        "CREATE UNIQUE INDEX events_by_device ON events (application_id, device_id, sequence)",
        "CREATE INDEX events_by_time ON events (application_id, corrected_time, id)",
        "CREATE INDEX events_by_user ON events (application_id, user_id, corrected_time, id)",
        "CREATE INDEX events_by_asset ON events (application_id, asset_id, corrected_time, id)",
        "CREATE INDEX events_by_type ON events (application_id, type, corrected_time, id)",
        "CREATE INDEX events_by_device_time ON events (application_id, device_id, corrected_time, id)",
        """
        CREATE TABLE event_floors (
            application_id text COLLATE "C" NOT NULL, device_id text COLLATE "C" NOT NULL, deleted_through bigint NOT NULL,
            PRIMARY KEY (application_id, device_id))
        """,
        """
        CREATE TABLE download_grants (
            row_id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, grant_id text COLLATE "C" NOT NULL UNIQUE,
            application_id text COLLATE "C" NOT NULL REFERENCES applications ON DELETE CASCADE, user_id text COLLATE "C" NOT NULL,
            device_id text COLLATE "C" NOT NULL, asset_id text COLLATE "C" NOT NULL, state text COLLATE "C" NOT NULL, counts_for_lifetime boolean NOT NULL,
            "window" jsonb NOT NULL, granted_at timestamptz(3) NOT NULL, updated_at timestamptz(3) NOT NULL)
        """,
        "CREATE INDEX download_grants_by_application ON download_grants (application_id, row_id)",
        "CREATE INDEX download_grants_by_user ON download_grants (application_id, user_id, row_id)",
        "CREATE INDEX download_grants_by_user_asset ON download_grants (application_id, user_id, asset_id, state)",
        "CREATE INDEX download_grants_by_device ON download_grants (application_id, device_id, row_id)",
        """
        CREATE TABLE entitlement_keys (
            row_id bigint GENERATED BY DEFAULT AS IDENTITY UNIQUE, key_id text COLLATE "C" PRIMARY KEY,
            application_id text COLLATE "C" NOT NULL REFERENCES applications ON DELETE CASCADE, private_key bytea NOT NULL,
            created_at timestamptz(3) NOT NULL, retired_at timestamptz(3))
        """,
        """
        CREATE TABLE asset_policies (
            application_id text COLLATE "C" NOT NULL REFERENCES applications ON DELETE CASCADE, asset_id text COLLATE "C" NOT NULL,
            policy jsonb NOT NULL, updated_at timestamptz(3) NOT NULL, PRIMARY KEY (application_id, asset_id))
        """,
    ]
}
