import Foundation
import PostgresNIO
import BackplaneWire

/// The event log: batch ingestion in one multi-row INSERT, the reporting reads, retention.
extension PostgresStore {
    static let eventColumns = [
        "application_id", "device_id", "sequence", "event_id", "type", "device_time", "received_at", "corrected_time",
        "user_id", "external_device_id", "app_state", "platform", "sdk_version", "app_version",
        "asset_id", "deletion_reason", "reset_type", "limit_type", "bitrate", "duration_seconds", "error_code", "error_message",
        "custom_name", "custom_string", "custom_number",
    ]

    public func insertEvents(
        applicationId: String, deviceId: String, _ events: [EventRecord], signedRequest: SignedRequestRecord?
    ) async throws -> [EventInsertOutcome] {
        try await transaction { [logger] connection in
            if let signedRequest, try await !Self.record(connection, signedRequest, logger: logger) { throw NonceReusedError() }
            // The device's floor row, locked: retention on another node cannot remove sequences
            // between this read and the insert (and so let a late retry in again).
            let floor = try await connection.rows("""
                INSERT INTO event_floors (application_id, device_id, deleted_through) VALUES (\(applicationId), \(deviceId), 0)
                ON CONFLICT (application_id, device_id) DO UPDATE SET deleted_through = event_floors.deleted_through
                RETURNING deleted_through
                """, logger: logger).first?.decode(Int64.self) ?? 0
            // The first event of each new sequence number goes in; the others are told apart below.
            var seen = Set<Int64>()
            let candidates = events.filter { $0.event.sequence > floor && seen.insert($0.event.sequence).inserted }
            var inserted = Set<Int64>()
            // A statement binds at most 65,535 values: 2,000 events of 25 columns each stay well below.
            for chunk in stride(from: 0, to: candidates.count, by: 2000).map({ candidates[$0..<min($0 + 2000, candidates.count)] }) {
                let query = try Self.insertQuery(applicationId: applicationId, deviceId: deviceId, Array(chunk))
                for row in try await connection.rows(query, logger: logger) { inserted.insert(try row.decode(Int64.self)) }
            }
            let others = Set(events.map(\.event.sequence)).subtracting(inserted).filter { $0 > floor }
            var stored: [Int64: String] = [:]
            if !others.isEmpty {
                for row in try await connection.rows("""
                    SELECT sequence, event_id FROM events
                    WHERE application_id = \(applicationId) AND device_id = \(deviceId) AND sequence = ANY(\(Array(others)))
                    """, logger: logger) {
                    let (sequence, eventId) = try row.decode((Int64, String).self)
                    stored[sequence] = eventId
                }
            }
            var claimed = Set<Int64>()
            return events.map { record in
                let event = record.event
                if event.sequence <= floor { return .duplicate }
                if inserted.contains(event.sequence), claimed.insert(event.sequence).inserted { return .inserted }
                // Inserted by an earlier event of this batch, or stored before it.
                let storedId = inserted.contains(event.sequence)
                    ? candidates.first { $0.event.sequence == event.sequence }?.event.eventId
                    : stored[event.sequence]
                return storedId == event.eventId ? .duplicate : .sequenceReused
            }
        }
    }

    /// One INSERT of many rows; every value is a bound parameter.
    private static func insertQuery(applicationId: String, deviceId: String, _ events: [EventRecord]) throws -> PostgresQuery {
        var binds = PostgresBindings(capacity: events.count * eventColumns.count)
        var rows: [String] = []
        for record in events {
            let event = record.event, content = event.content
            let first = binds.count
            binds.append(applicationId)
            binds.append(deviceId)
            binds.append(event.sequence)
            binds.append(event.eventId)
            binds.append(content.type.rawValue)
            binds.append(event.deviceTime.millisecondsSince1970)
            binds.append(record.receivedAt.millisecondsSince1970)
            binds.append(record.correctedTime.millisecondsSince1970)
            binds.append(event.userId)
            binds.append(event.externalDeviceId)
            binds.append(event.appState?.rawValue)
            binds.append(event.platform)
            binds.append(event.sdkVersion)
            binds.append(event.appVersion)
            binds.append(content.assetId)
            binds.append(content.deletionReason?.rawValue)
            binds.append(content.resetType?.rawValue)
            binds.append(content.limitType?.rawValue)
            binds.append(content.bitrate)
            binds.append(content.durationSeconds)
            binds.append(content.errorCode)
            binds.append(content.errorMessage)
            binds.append(content.customName)
            binds.append(content.customString)
            binds.append(content.customNumber)
            rows.append("(" + (first + 1...binds.count).map { "$\($0)" }.joined(separator: ", ") + ")")
        }
        let sql = """
            INSERT INTO events (\(eventColumns.joined(separator: ", "))) VALUES \(rows.joined(separator: ", "))
            ON CONFLICT (application_id, device_id, sequence) DO NOTHING RETURNING sequence
            """
        return PostgresQuery(unsafeSQL: sql, binds: binds)
    }

    public func events(applicationId: String, filter: EventFilter, after: EventKey?, limit: Int) async throws -> [EventRecord] {
        var (conditions, binds) = Self.conditions(applicationId: applicationId, filter)
        if let after {
            binds.append(after.correctedTime.millisecondsSince1970)
            binds.append(after.rowId)
            conditions.append("(corrected_time, id) > ($\(binds.count - 1), $\(binds.count))")
        }
        binds.append(limit)
        let sql = """
            SELECT id, \(Self.eventColumns.joined(separator: ", ")) FROM events WHERE \(conditions.joined(separator: " AND "))
            ORDER BY corrected_time, id LIMIT $\(binds.count)
            """
        return try await rows(PostgresQuery(unsafeSQL: sql, binds: binds)).records(Self.eventRecord)
    }

    public func eventCounts(applicationId: String, filter: EventFilter) async throws -> [EventCounts.Row] {
        let (conditions, binds) = Self.conditions(applicationId: applicationId, filter)
        let sql = """
            SELECT to_char(to_timestamp(corrected_time / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, type, COUNT(*) AS count
            FROM events WHERE \(conditions.joined(separator: " AND ")) GROUP BY day, type ORDER BY day, type
            """
        return try await rows(PostgresQuery(unsafeSQL: sql, binds: binds)).records { row in
            guard let type = EventType.known(try row("type")) else { return nil }
            return EventCounts.Row(day: try row("day"), type: type, count: try row("count", as: Int.self))
        }.compactMap { $0 }
    }

    public func deleteEvents(correctedBefore date: Date, limit: Int) async throws -> Int {
        let cutoff = date.millisecondsSince1970
        return try await transaction { [logger] connection in
            var removed = 0
            // Per application, through the (application_id, corrected_time) index.
            for applicationId in try await connection.rows("SELECT id FROM applications ORDER BY id", logger: logger).map({ try $0.decode(String.self) })
            where removed < limit {
                let deleted = try await connection.rows("""
                    WITH doomed AS (
                        SELECT id FROM events WHERE application_id = \(applicationId) AND corrected_time < \(cutoff)
                        ORDER BY corrected_time LIMIT \(limit - removed)),
                    gone AS (DELETE FROM events WHERE id IN (SELECT id FROM doomed) RETURNING device_id, sequence),
                    floors AS (
                        INSERT INTO event_floors (application_id, device_id, deleted_through)
                        SELECT \(applicationId), device_id, MAX(sequence) FROM gone GROUP BY device_id
                        ON CONFLICT (application_id, device_id)
                        DO UPDATE SET deleted_through = GREATEST(event_floors.deleted_through, excluded.deleted_through))
                    SELECT COUNT(*) FROM gone
                    """, logger: logger)
                removed += try deleted.first?.decode(Int.self) ?? 0
            }
            return removed
        }
    }

    private static func conditions(applicationId: String, _ filter: EventFilter) -> ([String], PostgresBindings) {
        var binds = PostgresBindings()
        var conditions: [String] = []
        func equal(_ column: String, _ value: String?) {
            guard let value else { return }
            binds.append(value)
            conditions.append("\(column) = $\(binds.count)")
        }
        equal("application_id", applicationId)
        equal("type", filter.type?.rawValue)
        equal("user_id", filter.userId)
        equal("device_id", filter.deviceId)
        equal("asset_id", filter.assetId)
        if let from = filter.from {
            binds.append(from.millisecondsSince1970)
            conditions.append("corrected_time >= $\(binds.count)")
        }
        if let to = filter.to {
            binds.append(to.millisecondsSince1970)
            conditions.append("corrected_time < $\(binds.count)")
        }
        return (conditions, binds)
    }

    private static func eventRecord(_ row: StoredRow) throws -> EventRecord {
        let content = EventContent(
            type: EventType(rawValue: try row("type")), assetId: try row("asset_id"),
            deletionReason: try row("deletion_reason", as: String?.self).flatMap(AssetDeletionReason.init(rawValue:)),
            resetType: try row("reset_type", as: String?.self).flatMap(ResetType.init(rawValue:)),
            limitType: try row("limit_type", as: String?.self).flatMap(DownloadLimitType.init(rawValue:)),
            bitrate: try row("bitrate"), durationSeconds: try row("duration_seconds"),
            errorCode: try row("error_code"), errorMessage: try row("error_message"),
            customName: try row("custom_name"), customString: try row("custom_string"), customNumber: try row("custom_number"))
        let event = DeviceEvent(
            eventId: try row("event_id"), sequence: try row("sequence"),
            deviceTime: Date(millisecondsSince1970: try row("device_time")),
            appState: try row("app_state", as: String?.self).flatMap(AppState.init(rawValue:)), platform: try row("platform"),
            sdkVersion: try row("sdk_version"), appVersion: try row("app_version"), userId: try row("user_id"),
            externalDeviceId: try row("external_device_id"), content: content)
        return EventRecord(
            rowId: try row("id"), applicationId: try row("application_id"), deviceId: try row("device_id"), event: event,
            receivedAt: Date(millisecondsSince1970: try row("received_at")),
            correctedTime: Date(millisecondsSince1970: try row("corrected_time")))
    }
}
