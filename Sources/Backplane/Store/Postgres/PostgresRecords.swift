import Foundation
import PostgresNIO
import BackplaneWire

// How the records map to the PostgreSQL tables: each record's column list (JSON columns read as
// text) and its decoding from a row selected with that list. Kept apart from the records, as the
// GRDB conformances are for SQLite.

/// A selected row read by column name.
struct StoredRow {
    let row: PostgresRandomAccessRow
    /// Put before each column's name: a joined table's columns, renamed apart from the others'.
    let prefix: String

    init(_ row: PostgresRow) {
        self.init(row.makeRandomAccess())
    }

    init(_ row: PostgresRandomAccessRow, prefix: String = "") {
        self.row = row
        self.prefix = prefix
    }

    func callAsFunction<T: PostgresDecodable>(_ column: String, as type: T.Type = T.self) throws -> T {
        try row[prefix.isEmpty ? column : prefix + column].decode(T.self)
    }

    /// A text column holding a raw value of `T`. A `WireVocabulary` reads any value (one a later
    /// version wrote included: its `isKnown` tells); another type's unknown value throws.
    func value<T: RawRepresentable>(_ column: String, as type: T.Type = T.self) throws -> T where T.RawValue == String {
        let raw = try self(column, as: String.self)
        guard let value = T(rawValue: raw) else { throw StoredValueError(column: column, value: raw) }
        return value
    }

    /// A JSON column selected as text.
    func json<T: Decodable>(_ column: String, as type: T.Type = T.self) throws -> T {
        try StoredJSON.decode(T.self, try self(column, as: String.self))
    }

    func json<T: Decodable>(_ column: String, as type: T?.Type) throws -> T? {
        try self(column, as: String?.self).map { try StoredJSON.decode(T.self, $0) }
    }
}

/// A stored value this version does not know (written by a newer one, or by hand).
struct StoredValueError: Error, CustomStringConvertible {
    var column: String
    var value: String
    var description: String { "Unknown value \(value) in column \(column)." }
}

enum PostgresColumns {
    static let application = "id, name, settings::text AS settings, created_at"
    static let userIdentity = "application_id, required, issuer, audience, jwks, jwks_url, hs256_secret, updated_at"
    static let appKey = "key_id, application_id, secret, created_at, revoked_at, last_used_at"
    static let token = "id, application_id, scope, token_hash, name, created_at, revoked_at, expires_at, last_used_at"
    static let device = """
        row_id, application_id, device_id, user_id, external_device_id, nickname, platform, model, os_version, sdk_version,
        app_version, push_token, download_enabled, credential_hash, public_key, registered_at, updated_at, last_seen_at, unregistered_at,
        push_provider
        """
    static let command = """
        row_id, command_id, application_id, device_id, type, asset_ids, state, created_at, updated_at, expires_at, delivered_at,
        completed_at, failure_reason, deferrals
        """
    static let feed = "application_id, feed_id, title, metadata::text AS metadata, created_at, updated_at, deleted_at"
    static let episode = "application_id, feed_id, asset_id, episode::text AS episode, announced_at, updated_at, retracted_at"
    static let subscription = """
        application_id, device_id, feed_id, max_items, autodelete_old_items, since_seq, subscribed_at, updated_at
        """
    static let grant = """
        row_id, grant_id, application_id, user_id, device_id, asset_id, state, counts_for_lifetime, "window"::text AS "window",
        granted_at, updated_at
        """
    static let entitlementKey = "key_id, application_id, private_key, created_at, retired_at"
    static let assetPolicy = "application_id, asset_id, policy::text AS policy, updated_at"

    /// A plain column list (names only, no expressions) qualified by a table alias, each column
    /// renamed `prefix` + its name when a prefix is given: `d.row_id` or `c.row_id AS c_row_id`.
    static func qualified(_ columns: String, by alias: String, prefix: String = "") -> String {
        columns.split(separator: ",").map { column in
            let name = column.trimmingCharacters(in: .whitespacesAndNewlines)
            return prefix.isEmpty ? "\(alias).\(name)" : "\(alias).\(name) AS \(prefix)\(name)"
        }.joined(separator: ", ")
    }
}

extension ApplicationRecord {
    init(_ row: StoredRow) throws {
        self.init(id: try row("id"), name: try row("name"), settings: try row.json("settings"), createdAt: try row("created_at"))
    }
}

extension UserIdentityRecord {
    init(_ row: StoredRow) throws {
        self.init(
            applicationId: try row("application_id"), required: try row("required"), issuer: try row("issuer"),
            audience: try row("audience"), jwks: try row("jwks"), jwksUrl: try row("jwks_url"), hs256Secret: try row("hs256_secret"),
            updatedAt: try row("updated_at"))
    }
}

extension AppKeyRecord {
    init(_ row: StoredRow) throws {
        self.init(
            keyId: try row("key_id"), applicationId: try row("application_id"), secret: try row("secret"),
            createdAt: try row("created_at"), revokedAt: try row("revoked_at"), lastUsedAt: try row("last_used_at"))
    }
}

extension TokenRecord {
    init(_ row: StoredRow) throws {
        self.init(
            id: try row("id"), applicationId: try row("application_id"), scope: try row.value("scope"), tokenHash: try row("token_hash"),
            name: try row("name"), createdAt: try row("created_at"), revokedAt: try row("revoked_at"), expiresAt: try row("expires_at"),
            lastUsedAt: try row("last_used_at"))
    }
}

extension DeviceRecord {
    init(_ row: StoredRow) throws {
        self.init(
            rowId: try row("row_id"), applicationId: try row("application_id"), deviceId: try row("device_id"), userId: try row("user_id"),
            externalDeviceId: try row("external_device_id"), nickname: try row("nickname"), platform: try row("platform"),
            model: try row("model"), osVersion: try row("os_version"), sdkVersion: try row("sdk_version"),
            appVersion: try row("app_version"), pushToken: try row("push_token"), downloadEnabled: try row("download_enabled"),
            credentialHash: try row("credential_hash"), publicKey: try row("public_key"), registeredAt: try row("registered_at"),
            updatedAt: try row("updated_at"), lastSeenAt: try row("last_seen_at"), unregisteredAt: try row("unregistered_at"),
            // A provider of a later release reads as it is (as on SQLite); no sender takes it.
            pushProvider: try row("push_provider", as: String?.self).map(PushProvider.init(rawValue:)))
    }
}

extension CommandRecord {
    init(_ row: StoredRow) throws {
        self.init(
            rowId: try row("row_id"), commandId: try row("command_id"), applicationId: try row("application_id"),
            deviceId: try row("device_id"), type: try row.value("type"), assetIds: try row("asset_ids"), state: try row.value("state"),
            createdAt: try row("created_at"), updatedAt: try row("updated_at"), expiresAt: try row("expires_at"),
            deliveredAt: try row("delivered_at"), completedAt: try row("completed_at"), failureReason: try row("failure_reason"),
            deferrals: try row("deferrals"))
    }
}

extension FeedRecord {
    init(_ row: StoredRow) throws {
        self.init(
            applicationId: try row("application_id"), feedId: try row("feed_id"), title: try row("title"),
            metadata: try row.json("metadata", as: [String: JSONValue]?.self), createdAt: try row("created_at"),
            updatedAt: try row("updated_at"), deletedAt: try row("deleted_at"))
    }
}

extension EpisodeRecord {
    init(_ row: StoredRow) throws {
        self.init(
            applicationId: try row("application_id"), feedId: try row("feed_id"), assetId: try row("asset_id"),
            episode: try row.json("episode"), announcedAt: try row("announced_at"), updatedAt: try row("updated_at"),
            retractedAt: try row("retracted_at"))
    }
}

extension SubscriptionRecord {
    init(_ row: StoredRow) throws {
        self.init(
            applicationId: try row("application_id"), deviceId: try row("device_id"), feedId: try row("feed_id"),
            maxItems: try row("max_items"), autodeleteOldItems: try row("autodelete_old_items"), sinceSeq: try row("since_seq"),
            subscribedAt: try row("subscribed_at"), updatedAt: try row("updated_at"))
    }
}

extension DownloadGrantRecord {
    init(_ row: StoredRow) throws {
        self.init(
            rowId: try row("row_id"), grantId: try row("grant_id"), applicationId: try row("application_id"), userId: try row("user_id"),
            deviceId: try row("device_id"), assetId: try row("asset_id"), state: try row.value("state"),
            countsForLifetime: try row("counts_for_lifetime"), window: try row.json("window"), grantedAt: try row("granted_at"),
            updatedAt: try row("updated_at"))
    }
}

extension EntitlementKeyRecord {
    init(_ row: StoredRow) throws {
        self.init(
            keyId: try row("key_id"), applicationId: try row("application_id"), privateKey: try row("private_key"),
            createdAt: try row("created_at"), retiredAt: try row("retired_at"))
    }
}

extension AssetPolicyRecord {
    init(_ row: StoredRow) throws {
        self.init(
            applicationId: try row("application_id"), assetId: try row("asset_id"), policy: try row.json("policy"),
            updatedAt: try row("updated_at"))
    }
}

extension Array where Element == PostgresRow {
    /// Each row as a record.
    func records<Record>(_ make: (StoredRow) throws -> Record) throws -> [Record] {
        try map { try make(StoredRow($0)) }
    }
}

extension ContentKeyRecord {
    init(_ row: StoredRow) throws {
        self.init(
            applicationId: try row("application_id"), assetId: try row("asset_id"), kid: try row("kid"), sealedKey: try row("sealed_key"),
            sealedWith: try row("sealed_with"), createdAt: try row("created_at"))
    }
}
