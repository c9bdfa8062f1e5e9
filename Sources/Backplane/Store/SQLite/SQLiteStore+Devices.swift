import Foundation
import GRDB
import BackplaneWire

/// Devices, and the per-user limit on download-enabled devices checked in the transaction that changes them.
extension SQLiteStore {
    public func device(applicationId: String, deviceId: String) async throws -> DeviceRecord? {
        try await pointRead { db in try Self.device(db, applicationId: applicationId, deviceId: deviceId) }
    }

    public func devices(applicationId: String, userId: String) async throws -> [DeviceRecord] {
        try await read { db in
            try DeviceRecord
                .filter { $0.applicationId == applicationId && $0.userId == userId && $0.unregisteredAt == nil }
                .order(\.rowId)
                .fetchAll(db)
        }
    }

    public func devices(applicationId: String, filter: DeviceFilter, afterRowId: Int64?, limit: Int) async throws -> [DeviceRecord] {
        try await read { db in
            var request = DeviceRecord.filter { $0.applicationId == applicationId }
            if let userId = filter.userId { request = request.filter { $0.userId == userId } }
            if let external = filter.externalDeviceId { request = request.filter { $0.externalDeviceId == external } }
            if let nickname = filter.nickname { request = request.filter { $0.nickname == nickname } }
            if !filter.includeUnregistered { request = request.filter { $0.unregisteredAt == nil } }
            if let afterRowId { request = request.filter { $0.rowId > afterRowId } }
            return try request.order(\.rowId).limit(limit).fetchAll(db)
        }
    }

    public func fleetSummary(applicationId: String, seenSince: Date) async throws -> FleetSummary {
        try await read { db in
            let row = try Row.fetchOne(db, sql: """
                SELECT COUNT(*) AS registered, COALESCE(SUM(download_enabled), 0) AS enabled,
                       COALESCE(SUM(last_seen_at >= ?), 0) AS seen
                FROM devices WHERE application_id = ? AND unregistered_at IS NULL
                """, arguments: [seenSince, applicationId])
            return FleetSummary(
                registeredDevices: row?["registered"] ?? 0, downloadEnabledDevices: row?["enabled"] ?? 0, devicesSeenSince: row?["seen"] ?? 0)
        }
    }

    public func registerDevice<Decision: Sendable>(
        applicationId: String, deviceId: String, userId: String,
        decide: @escaping @Sendable (RegistrationState) throws -> (DeviceChange, Decision)
    ) async throws -> (DeviceRecord, Decision) {
        try await write { db in
            let existing = try Self.device(db, applicationId: applicationId, deviceId: deviceId)
            let limit = try Self.limitState(db, applicationId: applicationId, userId: userId, excluding: deviceId)
            var (change, decision) = try decide(RegistrationState(existing: existing, limit: limit))
            change.device.rowId = existing?.rowId
            try change.device.save(db)
            try Self.releaseGrants(db, change)
            return (change.device, decision)
        }
    }

    public func updateDevice(
        applicationId: String, deviceId: String,
        _ change: @escaping @Sendable (DeviceRecord, DeviceLimitState) throws -> DeviceChange
    ) async throws -> DeviceRecord? {
        try await write { db in
            guard let existing = try Self.device(db, applicationId: applicationId, deviceId: deviceId) else { return nil }
            let limit = try Self.limitState(db, applicationId: applicationId, userId: existing.userId, excluding: deviceId)
            var change = try change(existing, limit)
            change.device.rowId = existing.rowId
            if change.device != existing { try change.device.update(db) }
            try Self.releaseGrants(db, change)
            return change.device
        }
    }

    /// The grants a device change ends, as its decision says.
    private static func releaseGrants(_ db: Database, _ change: DeviceChange) throws {
        guard let release = change.releases else { return }
        try releaseGrants(
            db, applicationId: change.device.applicationId, deviceId: change.device.deviceId, assetIds: release.assetIds,
            at: change.device.updatedAt)
    }

    public func recordLastSeen(_ sightings: [DeviceSighting]) async throws {
        try await write { db in
            let statement = try db.cachedStatement(
                sql: "UPDATE devices SET last_seen_at = ? WHERE application_id = ? AND device_id = ? AND last_seen_at < ?")
            for sighting in sightings {
                try statement.execute(arguments: [sighting.at.stored, sighting.applicationId, sighting.deviceId, sighting.at.stored])
            }
        }
    }

    static func device(_ db: Database, applicationId: String, deviceId: String) throws -> DeviceRecord? {
        try ColumnCursor(
            db.cachedStatement(sql: "SELECT \(DeviceRecord.selectSQL) FROM devices WHERE application_id = ? AND device_id = ?"),
            arguments: [applicationId, deviceId], element: { try DeviceRecord(columns: $0) }
        ).next()
    }

    private static func limitState(_ db: Database, applicationId: String, userId: String, excluding deviceId: String) throws -> DeviceLimitState {
        // The settings column alone, through a statement prepared once: a registration's write
        // needs no more, and decoding the whole record through `Decodable` would run while no other write can.
        guard let settings = try String.fetchOne(db.cachedStatement(sql: "SELECT settings FROM applications WHERE id = ?"), arguments: [applicationId])
        else { throw StoreError.unknownApplication(applicationId) }
        let counts = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT COALESCE(SUM(download_enabled), 0), COUNT(*) FROM devices
            WHERE application_id = ? AND user_id = ? AND unregistered_at IS NULL AND device_id <> ?
            """), arguments: [applicationId, userId, deviceId])
        return DeviceLimitState(
            settings: try StoredJSON.decode(ApplicationSettings.self, settings), otherEnabledDevices: counts?[0] ?? 0,
            otherRegisteredDevices: counts?[1] ?? 0)
    }

    public func deviceWithOpenCommands(applicationId: String, deviceId: String) async throws -> (DeviceRecord, [CommandRecord])? {
        try await pointRead { db in
            var device: DeviceRecord?  // from the first row; the others repeat it
            let commands = try Array(ColumnCursor(
                db.cachedStatement(sql: Self.deviceWithOpenCommandsSQL), arguments: [applicationId, deviceId],
                element: { columns -> CommandRecord? in
                    if device == nil { device = try DeviceRecord(columns: columns) }
                    let commandColumns = ShiftedColumns(base: columns, offset: DeviceRecord.columnNames.count)
                    return try (commandColumns.value(0) as Int64?).map { _ in try CommandRecord(columns: commandColumns) }
                }))
            guard let device else { return nil }
            return (device, commands.compactMap { $0 }.sorted { ($0.rowId ?? 0) < ($1.rowId ?? 0) })
        }
    }

    /// The device and its open commands in one statement, and so from one snapshot: a statement
    /// outside a transaction takes and drops SQLite's read locks, and a second statement, for the
    /// open commands most devices do not have, would cost every signed request as much again.
    /// A row per open command, the device's columns then the command's; or one row with the
    /// command's columns NULL.
    private static let deviceWithOpenCommandsSQL = """
        SELECT \(qualified(DeviceRecord.columnNames, by: "d")), \(qualified(CommandRecord.columnNames, by: "c"))
        FROM devices d LEFT JOIN commands c
            ON c.application_id = d.application_id AND c.device_id = d.device_id AND c.state IN ('pending', 'delivered')
        WHERE d.application_id = ? AND d.device_id = ?
        """

    /// Column names for a select list, each as `alias.name`.
    private static func qualified(_ names: [String], by alias: String) -> String {
        names.map { "\(alias).\($0)" }.joined(separator: ", ")
    }
}
