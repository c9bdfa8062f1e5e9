import Foundation

// The tables of migrations that both stores apply, written once with each store's column types:
// SQLite's migrator and PostgreSQL's list (`PostgresSchema.migrations`) take their statements
// from here.

/// Migration v14 (PostgreSQL's 6): each application's push credentials, one row per provider;
/// when each device was last pushed (integer milliseconds, compared on every claim); and which
/// provider a device's push token belongs to. Never edit once shipped.
enum PushTables {
    /// `time` is the store's column type for a point in time, `text` its text type, `integer`
    /// its 64-bit integer.
    static func statements(time: String, text: String, integer: String, withoutRowId: String) -> [String] {
        [
            "ALTER TABLE devices ADD COLUMN push_provider \(text)",
            """
            CREATE TABLE push_credentials (
                application_id \(text) NOT NULL REFERENCES applications ON DELETE CASCADE, provider \(text) NOT NULL,
                secret \(text) NOT NULL, set_at \(time) NOT NULL, broken_at \(time), broken_reason \(text),
                PRIMARY KEY (application_id, provider))
            """,
            """
            CREATE TABLE device_pushes (
                application_id \(text) NOT NULL REFERENCES applications ON DELETE CASCADE, device_id \(text) NOT NULL,
                pushed_at \(integer) NOT NULL,
                PRIMARY KEY (application_id, device_id))\(withoutRowId)
            """,
        ]
    }

    static var sqlite: String {
        statements(time: "DATETIME", text: "TEXT", integer: "INTEGER", withoutRowId: " WITHOUT ROWID").map { $0 + ";" }.joined(separator: "\n")
    }

    static var postgres: [String] {
        statements(time: "timestamptz(3)", text: "text COLLATE \"C\"", integer: "bigint", withoutRowId: "")
    }
}

/// Migration v15 (PostgreSQL's 7): each user token that carried a `jti`, bound to the one
/// device it registered until the token expires, so that a leaked token cannot register others.
/// Never edit once shipped.
enum UserTokenUses {
    static func statements(time: String, text: String, withoutRowId: String) -> [String] {
        [
            """
            CREATE TABLE user_token_uses (
                application_id \(text) NOT NULL REFERENCES applications ON DELETE CASCADE, token_id \(text) NOT NULL,
                device_id \(text) NOT NULL, expires_at \(time) NOT NULL,
                PRIMARY KEY (application_id, token_id))\(withoutRowId)
            """,
            "CREATE INDEX user_token_uses_by_expiry ON user_token_uses (expires_at)",
        ]
    }

    static var sqlite: String {
        statements(time: "DATETIME", text: "TEXT", withoutRowId: " WITHOUT ROWID").map { $0 + ";" }.joined(separator: "\n")
    }

    static var postgres: [String] {
        statements(time: "timestamptz(3)", text: "text COLLATE \"C\"", withoutRowId: "")
    }
}

/// Migration v16 (PostgreSQL's 8): assets' content keys, sealed (`ContentKeyStore`). A key id
/// opens one asset of an application, hence the primary key. Never edit once shipped.
enum ContentKeyTables {
    static func statements(time: String, text: String, bytes: String, withoutRowId: String) -> [String] {
        [
            """
            CREATE TABLE content_keys (
                application_id \(text) NOT NULL REFERENCES applications ON DELETE CASCADE, kid \(text) NOT NULL,
                asset_id \(text) NOT NULL, sealed_key \(bytes) NOT NULL, sealed_with \(text) NOT NULL, created_at \(time) NOT NULL,
                PRIMARY KEY (application_id, kid))\(withoutRowId)
            """,
            "CREATE INDEX content_keys_by_asset ON content_keys (application_id, asset_id, created_at)",
        ]
    }

    static var sqlite: String {
        statements(time: "DATETIME", text: "TEXT", bytes: "BLOB", withoutRowId: " WITHOUT ROWID").map { $0 + ";" }.joined(separator: "\n")
    }

    static var postgres: [String] {
        statements(time: "timestamptz(3)", text: "text COLLATE \"C\"", bytes: "bytea", withoutRowId: "")
    }
}

/// Migration v17 (PostgreSQL's 9): devices' agreement keys and the licenses issued
/// (`LicenseStore`). A license's key ids are lowercase hex joined by commas. Never edit once shipped.
enum LicenseTables {
    static func statements(time: String, text: String, bytes: String, withoutRowId: String) -> [String] {
        [
            """
            CREATE TABLE agreement_keys (
                application_id \(text) NOT NULL REFERENCES applications ON DELETE CASCADE, device_id \(text) NOT NULL,
                public_key \(bytes) NOT NULL, set_at \(time) NOT NULL,
                PRIMARY KEY (application_id, device_id))\(withoutRowId)
            """,
            """
            CREATE TABLE licenses (
                license_id \(text) PRIMARY KEY, application_id \(text) NOT NULL REFERENCES applications ON DELETE CASCADE,
                device_id \(text) NOT NULL, user_id \(text) NOT NULL, asset_id \(text) NOT NULL, grant_id \(text) NOT NULL,
                system \(text) NOT NULL, kids \(text) NOT NULL, issued_at \(time) NOT NULL, renewed_at \(time), expires_at \(time),
                released_at \(time))
            """,
            "CREATE INDEX licenses_by_device ON licenses (application_id, device_id, issued_at)",
            "CREATE INDEX licenses_by_grant ON licenses (grant_id)",
        ]
    }

    static var sqlite: String {
        statements(time: "DATETIME", text: "TEXT", bytes: "BLOB", withoutRowId: " WITHOUT ROWID").map { $0 + ";" }.joined(separator: "\n")
    }

    static var postgres: [String] {
        statements(time: "timestamptz(3)", text: "text COLLATE \"C\"", bytes: "bytea", withoutRowId: "")
    }
}

/// Migration v18 (PostgreSQL's 10): the license servers applications forward to
/// (`LicenseServerStore`); `headers` is a JSON object. Never edit once shipped.
enum LicenseServerTables {
    static func statements(time: String, text: String, withoutRowId: String) -> [String] {
        [
            """
            CREATE TABLE license_servers (
                application_id \(text) NOT NULL REFERENCES applications ON DELETE CASCADE, system \(text) NOT NULL,
                url \(text) NOT NULL, headers \(text) NOT NULL, updated_at \(time) NOT NULL,
                PRIMARY KEY (application_id, system))\(withoutRowId)
            """,
        ]
    }

    static var sqlite: String {
        statements(time: "DATETIME", text: "TEXT", withoutRowId: " WITHOUT ROWID").map { $0 + ";" }.joined(separator: "\n")
    }

    static var postgres: [String] {
        statements(time: "timestamptz(3)", text: "text COLLATE \"C\"", withoutRowId: "")
    }
}
