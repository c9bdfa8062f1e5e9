import Foundation
import GRDB
import BackplaneWire

// How the records map to the SQLite tables. Kept with the SQLite store so the records stay plain
// for other stores. Column names are snake_case versions of the properties; `Columns` names the
// ones queries filter and sort on, so a typo is a compile error rather than a runtime one.

public protocol SnakeCaseRecord: FetchableRecord, MutablePersistableRecord {}
extension SnakeCaseRecord {
    public static var databaseColumnDecodingStrategy: DatabaseColumnDecodingStrategy { .convertFromSnakeCase }
    public static var databaseColumnEncodingStrategy: DatabaseColumnEncodingStrategy { .convertToSnakeCase }
}

extension ApplicationRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "applications" }

    public enum Columns {
        public static let id = Column("id")
        public static let createdAt = Column("created_at")
    }
}

extension UserIdentityRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "user_identities" }
}

extension PushCredentialsRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "push_credentials" }
}

extension AppKeyRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "app_keys" }

    public enum Columns {
        public static let keyId = Column("key_id")
        public static let applicationId = Column("application_id")
        public static let createdAt = Column("created_at")
        public static let revokedAt = Column("revoked_at")
    }
}

extension TokenRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "tokens" }

    public enum Columns {
        public static let tokenHash = Column("token_hash")
    }
}

extension DeviceRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "devices" }

    public enum Columns {
        public static let rowId = Column("row_id")
        public static let applicationId = Column("application_id")
        public static let deviceId = Column("device_id")
        public static let userId = Column("user_id")
        public static let externalDeviceId = Column("external_device_id")
        public static let nickname = Column("nickname")
        public static let unregisteredAt = Column("unregistered_at")
    }

    /// The columns every read of a device selects, in the order `init(row:)` reads them: the
    /// query interface selects them (`databaseSelection`), raw SQL through `selectSQL`.
    static let columnNames = [
        "row_id", "application_id", "device_id", "user_id", "external_device_id", "nickname", "platform", "model", "os_version",
        "sdk_version", "app_version", "push_token", "download_enabled", "credential_hash", "public_key", "registered_at",
        "updated_at", "last_seen_at", "unregistered_at", "push_provider",
    ]
    public static var databaseSelection: [any SQLSelectable] { columnNames.map { Column($0) } }
    static let selectSQL = columnNames.joined(separator: ", ")

    /// Read by hand, not through `Decodable`, and by position, not by name: every signed device
    /// request reads its device, and the decoder's keyed containers, then the look-up of each
    /// column's name, are work on every such read that reading by position skips. The hot reads
    /// step the statement themselves (`ColumnCursor`). A value that does not convert throws, as
    /// the decoder would (`row[...]` would stop the process).
    public init(row: Row) throws { try self.init(columns: row) }

    init(columns: some ColumnValues) throws {
        self.init(
            rowId: try columns.value(0), applicationId: try columns.text(1), deviceId: try columns.text(2), userId: try columns.text(3),
            externalDeviceId: try columns.optionalText(4), nickname: try columns.optionalText(5), platform: try columns.text(6),
            model: try columns.optionalText(7), osVersion: try columns.optionalText(8), sdkVersion: try columns.optionalText(9),
            appVersion: try columns.optionalText(10), pushToken: try columns.optionalText(11), downloadEnabled: try columns.value(12),
            credentialHash: try columns.text(13), publicKey: try columns.optionalText(14),
            registeredAt: try columns.date(15), updatedAt: try columns.date(16), lastSeenAt: try columns.date(17),
            unregisteredAt: try columns.optionalDate(18), pushProvider: try columns.optionalText(19).flatMap(PushProvider.init(rawValue:)))
    }

    /// Written by hand too: `Encodable` converted each property name to snake case on every
    /// insert and update, and computing the primary key encodes the whole record again; all of it
    /// in the write, which runs while no other write can. `aDeviceReadsBackAsWritten` fails if a
    /// column is left out here.
    public func encode(to container: inout PersistenceContainer) throws {
        container["row_id"] = rowId
        container["application_id"] = applicationId
        container["device_id"] = device.deviceId
        container["user_id"] = device.userId
        container["external_device_id"] = device.externalDeviceId
        container["nickname"] = device.nickname
        container["platform"] = device.platform
        container["model"] = device.model
        container["os_version"] = device.osVersion
        container["sdk_version"] = device.sdkVersion
        container["app_version"] = device.appVersion
        container["push_token"] = device.pushToken
        container["push_provider"] = device.pushProvider?.rawValue
        container["download_enabled"] = device.downloadEnabled
        container["credential_hash"] = credentialHash
        container["public_key"] = publicKey
        container["registered_at"] = device.registeredAt.stored
        container["updated_at"] = device.updatedAt.stored
        container["last_seen_at"] = device.lastSeenAt.stored
        container["unregistered_at"] = device.unregisteredAt.stored
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        rowId = inserted.rowID
    }
}

extension CommandRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "commands" }

    public enum Columns {
        public static let rowId = Column("row_id")
        public static let applicationId = Column("application_id")
        public static let deviceId = Column("device_id")
        public static let commandId = Column("command_id")
        public static let state = Column("state")
        public static let type = Column("type")
    }

    /// Read by hand and by index, like `DeviceRecord`, from `columns` in their order: every
    /// sync reads its device's open commands. A value that does not convert throws.
    public init(row: Row) throws { try self.init(columns: row) }

    init(columns: some ColumnValues) throws {
        // A type or state this version does not know (written by a later one, before a
        // downgrade) reads as it is: the device decides what it can run.
        let type = CommandType(rawValue: try columns.text(4)), state = CommandState(rawValue: try columns.text(6))
        let assetIds = try columns.optionalText(5)
        self.init(
            rowId: try columns.value(0), commandId: try columns.text(1), applicationId: try columns.text(2), deviceId: try columns.text(3),
            type: type, assetIds: try assetIds.map { try StoredJSON.decode([String].self, $0) }, state: state,
            createdAt: try columns.date(7), updatedAt: try columns.date(8), expiresAt: try columns.optionalDate(9),
            deliveredAt: try columns.optionalDate(10), completedAt: try columns.optionalDate(11), failureReason: try columns.optionalText(12),
            deferrals: try columns.value(13))
    }

    /// What every read of a command selects, in `columns`' order.
    public static var databaseSelection: [any SQLSelectable] { columnNames.map { Column($0) } }
    static let columnNames = columns.map(\.name)
    static let selectSQL = columnNames.joined(separator: ", ")

    /// Written by hand, like `DeviceRecord`: a sync that delivers or acknowledges a command
    /// updates it inside the write. `aCommandReadsBackAsWritten` fails if a column is left out.
    public func encode(to container: inout PersistenceContainer) throws {
        for column in Self.columns { container[column.name] = try column.value(self) }
    }

    /// An update through a statement prepared once per connection: GRDB's `update` generates,
    /// parses and authorizes its SQL on every call, inside the write of every sync that
    /// acknowledges a command, which runs while no other write can.
    static func update(_ db: Database, _ command: CommandRecord) throws {
        let values = try columns.dropFirst().map { try $0.value(command) }
        try db.cachedStatement(sql: updateSQL).execute(arguments: StatementArguments(values + [command.rowId]))
        // As GRDB's `update` does: a command that is not there is an error, not a silent no-op.
        guard db.changesCount == 1 else {
            throw RecordError.recordNotFound(databaseTableName: databaseTableName, key: ["row_id": command.rowId.databaseValue])
        }
    }

    /// Every column with how to read its value, row id first: the one list `encode(to:)` and
    /// `update` write and `init(row:)` reads (by position).
    private static let columns: [(name: String, value: @Sendable (CommandRecord) throws -> (any DatabaseValueConvertible)?)] = [
        ("row_id", { $0.rowId }), ("command_id", { $0.commandId }), ("application_id", { $0.applicationId }),
        ("device_id", { $0.deviceId }), ("type", { $0.type.rawValue }), ("asset_ids", { try StoredJSON.encode($0.assetIds) }),
        ("state", { $0.state.rawValue }), ("created_at", { $0.createdAt.stored }), ("updated_at", { $0.updatedAt.stored }),
        ("expires_at", { $0.expiresAt.stored }), ("delivered_at", { $0.deliveredAt.stored }), ("completed_at", { $0.completedAt.stored }),
        ("failure_reason", { $0.failureReason }), ("deferrals", { $0.deferrals }),
    ]

    /// Every column but the row id, by row id.
    private static let updateSQL =
        "UPDATE commands SET " + columns.dropFirst().map { "\($0.name) = ?" }.joined(separator: ", ") + " WHERE row_id = ?"

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        rowId = inserted.rowID
    }
}

extension FeedRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "feeds" }

    public enum Columns {
        public static let applicationId = Column("application_id")
        public static let feedId = Column("feed_id")
        public static let deletedAt = Column("deleted_at")
    }
}

extension EpisodeRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "episodes" }

    public enum Columns {
        public static let applicationId = Column("application_id")
        public static let feedId = Column("feed_id")
        public static let assetId = Column("asset_id")
        public static let announcedAt = Column("announced_at")
        public static let updatedAt = Column("updated_at")
        public static let retractedAt = Column("retracted_at")
    }
}

extension SubscriptionRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "subscriptions" }

    public enum Columns {
        public static let applicationId = Column("application_id")
        public static let deviceId = Column("device_id")
        public static let feedId = Column("feed_id")
    }
}

extension DownloadGrantRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "download_grants" }

    public enum Columns {
        public static let rowId = Column("row_id")
        public static let grantId = Column("grant_id")
        public static let applicationId = Column("application_id")
        public static let userId = Column("user_id")
        public static let deviceId = Column("device_id")
        public static let assetId = Column("asset_id")
        public static let state = Column("state")
        public static let countsForLifetime = Column("counts_for_lifetime")
        public static let updatedAt = Column("updated_at")
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        rowId = inserted.rowID
    }
}

extension EntitlementKeyRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "entitlement_keys" }

    public enum Columns {
        public static let keyId = Column("key_id")
        public static let applicationId = Column("application_id")
        public static let createdAt = Column("created_at")
        public static let retiredAt = Column("retired_at")
    }
}

extension AssetPolicyRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "asset_policies" }

    public enum Columns {
        public static let applicationId = Column("application_id")
        public static let assetId = Column("asset_id")
    }
}

extension TokenScope: DatabaseValueConvertible {}
extension DownloadGrantState: DatabaseValueConvertible {}
extension CommandType: DatabaseValueConvertible {}
extension CommandState: DatabaseValueConvertible {}

extension ContentKeyRecord: SnakeCaseRecord {
    public static var databaseTableName: String { "content_keys" }
}
