import Foundation
import PostgresNIO
import BackplaneWire

/// Devices, and the per-user limit on download-enabled devices checked under the user's lock.
extension PostgresStore {
    public func device(applicationId: String, deviceId: String) async throws -> DeviceRecord? {
        try await connection { [logger] connection in
            try await Self.device(connection, applicationId: applicationId, deviceId: deviceId, logger: logger)
        }
    }

    public func devices(applicationId: String, userId: String) async throws -> [DeviceRecord] {
        try await rows("""
            SELECT \(unescaped: PostgresColumns.device) FROM devices
            WHERE application_id = \(applicationId) AND user_id = \(userId) AND unregistered_at IS NULL ORDER BY row_id
            """).records(DeviceRecord.init)
    }

    public func devices(applicationId: String, filter: DeviceFilter, afterRowId: Int64?, limit: Int) async throws -> [DeviceRecord] {
        // Each optional condition is written so that a NULL parameter switches it off.
        try await rows("""
            SELECT \(unescaped: PostgresColumns.device) FROM devices
            WHERE application_id = \(applicationId)
              AND (\(filter.userId)::text IS NULL OR user_id = \(filter.userId))
              AND (\(filter.externalDeviceId)::text IS NULL OR external_device_id = \(filter.externalDeviceId))
              AND (\(filter.nickname)::text IS NULL OR nickname = \(filter.nickname))
              AND (\(filter.includeUnregistered) OR unregistered_at IS NULL)
              AND row_id > \(afterRowId ?? 0)
            ORDER BY row_id LIMIT \(limit)
            """).records(DeviceRecord.init)
    }

    public func fleetSummary(applicationId: String, seenSince: Date) async throws -> FleetSummary {
        let row = try await rows("""
            SELECT COUNT(*), COUNT(*) FILTER (WHERE download_enabled), COUNT(*) FILTER (WHERE last_seen_at >= \(seenSince))
            FROM devices WHERE application_id = \(applicationId) AND unregistered_at IS NULL
            """).first
        guard let (registered, enabled, seen) = try row?.decode((Int64, Int64, Int64).self) else {
            return FleetSummary(registeredDevices: 0, downloadEnabledDevices: 0, devicesSeenSince: 0)
        }
        return FleetSummary(registeredDevices: Int(registered), downloadEnabledDevices: Int(enabled), devicesSeenSince: Int(seen))
    }

    public func registerDevice<Decision: Sendable>(
        applicationId: String, deviceId: String, userId: String,
        decide: @escaping @Sendable (RegistrationState) throws -> (DeviceChange, Decision)
    ) async throws -> (DeviceRecord, Decision) {
        try await transaction { [logger] connection in
            try await Self.lockDevice(connection, applicationId: applicationId, deviceId: deviceId, logger: logger)
            try await Self.lockUser(connection, applicationId: applicationId, userId: userId, logger: logger)
            let existing = try await Self.device(connection, applicationId: applicationId, deviceId: deviceId, logger: logger)
            let limit = try await Self.limitState(connection, applicationId: applicationId, userId: userId, excluding: deviceId, logger: logger)
            var (change, decision) = try decide(RegistrationState(existing: existing, limit: limit))
            if let existing {
                change.device.rowId = existing.rowId
                try await Self.update(connection, change.device, logger: logger)
            } else {
                change.device.rowId = try await Self.insert(connection, change.device, logger: logger)
            }
            try await Self.releaseGrants(connection, change, logger: logger)
            return (change.device, decision)
        }
    }

    public func updateDevice(
        applicationId: String, deviceId: String,
        _ change: @escaping @Sendable (DeviceRecord, DeviceLimitState) throws -> DeviceChange
    ) async throws -> DeviceRecord? {
        try await transaction { [logger] connection in
            try await Self.lockDevice(connection, applicationId: applicationId, deviceId: deviceId, logger: logger)
            guard let existing = try await Self.device(connection, applicationId: applicationId, deviceId: deviceId, logger: logger) else {
                return nil
            }
            try await Self.lockUser(connection, applicationId: applicationId, userId: existing.userId, logger: logger)
            let limit = try await Self.limitState(
                connection, applicationId: applicationId, userId: existing.userId, excluding: deviceId, logger: logger)
            var change = try change(existing, limit)
            change.device.rowId = existing.rowId
            if change.device != existing { try await Self.update(connection, change.device, logger: logger) }
            try await Self.releaseGrants(connection, change, logger: logger)
            return change.device
        }
    }

    /// The grants a device change ends, as its decision says.
    private static func releaseGrants(_ connection: PostgresConnection, _ change: DeviceChange, logger: Logger) async throws {
        guard let release = change.releases else { return }
        try await releaseGrants(
            connection, applicationId: change.device.applicationId, deviceId: change.device.deviceId, assetIds: release.assetIds,
            at: change.device.updatedAt, logger: logger)
    }

    public func recordLastSeen(_ sightings: [DeviceSighting]) async throws {
        guard !sightings.isEmpty else { return }
        // One statement for the batch; rows in a fixed order, so two nodes' batches never deadlock.
        let sorted = sightings.sorted { ($0.applicationId, $0.deviceId) < ($1.applicationId, $1.deviceId) }
        try await transaction { [logger] connection in try await connection.run("""
            UPDATE devices SET last_seen_at = s.at
            FROM unnest(\(sorted.map(\.applicationId)), \(sorted.map(\.deviceId)), \(sorted.map(\.at)))
                AS s(application_id, device_id, at)
            WHERE devices.application_id = s.application_id AND devices.device_id = s.device_id AND devices.last_seen_at < s.at
            """, logger: logger) }
    }

    /// The device's lock: every transaction that changes a device row takes it first.
    static func lockDevice(_ connection: PostgresConnection, applicationId: String, deviceId: String, logger: Logger) async throws {
        try await connection.lock("device\u{1F}\(applicationId)\u{1F}\(deviceId)", logger: logger)
    }

    /// The user's lock, taken after the device's: what counts toward the user's limits changes under it.
    static func lockUser(_ connection: PostgresConnection, applicationId: String, userId: String, logger: Logger) async throws {
        try await connection.lock("user\u{1F}\(applicationId)\u{1F}\(userId)", logger: logger)
    }

    static func device(_ connection: PostgresConnection, applicationId: String, deviceId: String, logger: Logger) async throws -> DeviceRecord? {
        try await connection.prepared(PreparedStatements.Device(applicationId: applicationId, deviceId: deviceId), logger: logger).first
    }

    private static func insert(_ connection: PostgresConnection, _ d: DeviceRecord, logger: Logger) async throws -> Int64? {
        try await connection.rows("""
            INSERT INTO devices (
                application_id, device_id, user_id, external_device_id, nickname, platform, model, os_version, sdk_version, app_version,
                push_token, download_enabled, credential_hash, public_key, registered_at, updated_at, last_seen_at, unregistered_at,
                push_provider)
            VALUES (
                \(d.applicationId), \(d.deviceId), \(d.userId), \(d.externalDeviceId), \(d.nickname), \(d.platform), \(d.model),
                \(d.osVersion), \(d.sdkVersion), \(d.appVersion), \(d.pushToken), \(d.downloadEnabled), \(d.credentialHash),
                \(d.publicKey), \(d.registeredAt), \(d.updatedAt), \(d.lastSeenAt), \(d.unregisteredAt), \(d.pushProvider?.rawValue))
            RETURNING row_id
            """, logger: logger).first?.decode(Int64.self)
    }

    /// Writes every column of the device's row but its key and row id. The last-seen time only
    /// moves forward: a batch of sightings may have committed since the row was read.
    static func update(_ connection: PostgresConnection, _ d: DeviceRecord, logger: Logger) async throws {
        try await connection.run("""
            UPDATE devices SET
                user_id = \(d.userId), external_device_id = \(d.externalDeviceId), nickname = \(d.nickname), platform = \(d.platform),
                model = \(d.model), os_version = \(d.osVersion), sdk_version = \(d.sdkVersion), app_version = \(d.appVersion),
                push_token = \(d.pushToken), download_enabled = \(d.downloadEnabled), credential_hash = \(d.credentialHash),
                public_key = \(d.publicKey), registered_at = \(d.registeredAt), updated_at = \(d.updatedAt),
                last_seen_at = GREATEST(devices.last_seen_at, \(d.lastSeenAt)), unregistered_at = \(d.unregisteredAt),
                push_provider = \(d.pushProvider?.rawValue)
            WHERE application_id = \(d.applicationId) AND device_id = \(d.deviceId)
            """, logger: logger)
    }

    private static func limitState(
        _ connection: PostgresConnection, applicationId: String, userId: String, excluding deviceId: String, logger: Logger
    ) async throws -> DeviceLimitState {
        let rows = try await connection.rows("""
            SELECT a.settings::text, COALESCE(d.enabled, 0), COALESCE(d.registered, 0)
            FROM applications a
            LEFT JOIN LATERAL (
                SELECT COUNT(*) FILTER (WHERE download_enabled) AS enabled, COUNT(*) AS registered FROM devices
                WHERE application_id = a.id AND user_id = \(userId) AND unregistered_at IS NULL AND device_id <> \(deviceId)
            ) d ON TRUE
            WHERE a.id = \(applicationId)
            """, logger: logger)
        guard let row = rows.first else { throw StoreError.unknownApplication(applicationId) }
        let (settings, enabled, registered) = try row.decode((String, Int, Int).self)
        return DeviceLimitState(
            settings: try StoredJSON.decode(ApplicationSettings.self, settings), otherEnabledDevices: enabled, otherRegisteredDevices: registered)
    }
}
