import Foundation
import GRDB
import BackplaneWire

/// The event log's queries: batch ingestion, the reporting reads, retention.
extension SQLiteStore {

    public func insertEvents(
        applicationId: String, deviceId: String, _ events: [EventRecord], signedRequest: SignedRequestRecord?
    ) async throws -> [EventInsertOutcome] {
        try await write(spending: signedRequest) { db in
            let floor = try Int64.fetchOne(
                db, sql: "SELECT deleted_through FROM event_floors WHERE application_id = ? AND device_id = ?",
                arguments: [applicationId, deviceId]) ?? 0
            let insert = try db.cachedStatement(sql: EventsSchema.insert)
            return try events.map { record in
                let event = record.event, content = event.content
                if event.sequence <= floor { return .duplicate }
                try insert.execute(arguments: [
                    applicationId, deviceId, event.sequence, event.eventId, content.type.rawValue,
                    event.deviceTime.millisecondsSince1970, record.receivedAt.millisecondsSince1970, record.correctedTime.millisecondsSince1970,
                    event.userId, event.externalDeviceId, event.appState?.rawValue, event.platform, event.sdkVersion, event.appVersion,
                    content.assetId, content.deletionReason?.rawValue, content.resetType?.rawValue, content.limitType?.rawValue,
                    content.bitrate, content.durationSeconds, content.errorCode, content.errorMessage,
                    content.customName, content.customString, content.customNumber,
                ])
                if db.changesCount == 1 { return .inserted }
                let stored = try String.fetchOne(
                    db, sql: "SELECT event_id FROM events WHERE application_id = ? AND device_id = ? AND sequence = ?",
                    arguments: [applicationId, deviceId, event.sequence])
                return stored == event.eventId ? .duplicate : .sequenceReused
            }
        }
    }

    public func events(applicationId: String, filter: EventFilter, after: EventKey?, limit: Int) async throws -> [EventRecord] {
        try await read { db in
            var (conditions, arguments) = Self.conditions(applicationId: applicationId, filter)
            if let after {
                conditions.append("(corrected_time, id) > (?, ?)")
                arguments += [after.correctedTime.millisecondsSince1970, after.rowId]
            }
            arguments.append(limit)
            let sql = "SELECT * FROM events WHERE \(conditions.joined(separator: " AND ")) ORDER BY corrected_time, id LIMIT ?"
            return try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments)).map(Self.eventRecord)
        }
    }

    public func eventCounts(applicationId: String, filter: EventFilter) async throws -> [EventCounts.Row] {
        try await read { db in
            let (conditions, arguments) = Self.conditions(applicationId: applicationId, filter)
            let sql = """
                SELECT date(corrected_time / 1000, 'unixepoch') AS day, type, COUNT(*) AS count FROM events
                WHERE \(conditions.joined(separator: " AND ")) GROUP BY day, type ORDER BY day, type
                """
            return try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments)).compactMap { row in
                // `date()` is NULL for a time SQLite cannot place on a calendar; ingestion refuses
                // such times, but a row stored before it did must not break the report.
                guard let day: String = row["day"], let type = EventType.known(row["type"]) else { return nil }
                return EventCounts.Row(day: day, type: type, count: row["count"])
            }
        }
    }

    public func deleteEvents(correctedBefore date: Date, limit: Int) async throws -> Int {
        try await write { db in
            let cutoff = date.millisecondsSince1970
            var removed = 0
            // Per application, through the (application_id, corrected_time) index.
            for applicationId in try String.fetchAll(db, sql: "SELECT id FROM applications") where removed < limit {
                let ids = try Int64.fetchAll(
                    db, sql: "SELECT id FROM events WHERE application_id = ? AND corrected_time < ? ORDER BY corrected_time LIMIT ?",
                    arguments: [applicationId, cutoff, limit - removed])
                guard !ids.isEmpty else { continue }
                let list = ids.map(String.init).joined(separator: ",")
                try db.execute(sql: """
                    INSERT INTO event_floors (application_id, device_id, deleted_through)
                    SELECT application_id, device_id, MAX(sequence) FROM events WHERE id IN (\(list)) GROUP BY application_id, device_id
                    ON CONFLICT (application_id, device_id) DO UPDATE SET deleted_through = MAX(deleted_through, excluded.deleted_through)
                    """)
                try db.execute(sql: "DELETE FROM events WHERE id IN (\(list))")
                removed += ids.count
            }
            return removed
        }
    }

    private static func conditions(applicationId: String, _ filter: EventFilter) -> ([String], [(any DatabaseValueConvertible)?]) {
        var conditions = ["application_id = ?"]
        var arguments: [(any DatabaseValueConvertible)?] = [applicationId]
        // A type is shared by a large part of the events, a user, device or asset by few: with
        // one of those given, `+type` keeps SQLite from searching the type's index instead.
        let narrower = filter.userId != nil || filter.deviceId != nil || filter.assetId != nil
        let equalities: [(String, String?)] = [
            (narrower ? "+type" : "type", filter.type?.rawValue), ("user_id", filter.userId), ("device_id", filter.deviceId),
            ("asset_id", filter.assetId),
        ]
        for case let (column, value?) in equalities {
            conditions.append("\(column) = ?")
            arguments.append(value)
        }
        if let from = filter.from {
            conditions.append("corrected_time >= ?")
            arguments.append(from.millisecondsSince1970)
        }
        if let to = filter.to {
            conditions.append("corrected_time < ?")
            arguments.append(to.millisecondsSince1970)
        }
        return (conditions, arguments)
    }

    private static func eventRecord(_ row: Row) -> EventRecord {
        let content = EventContent(
            type: EventType(rawValue: row["type"]), assetId: row["asset_id"],
            deletionReason: (row["deletion_reason"] as String?).flatMap(AssetDeletionReason.init(rawValue:)),
            resetType: (row["reset_type"] as String?).flatMap(ResetType.init(rawValue:)),
            limitType: (row["limit_type"] as String?).flatMap(DownloadLimitType.init(rawValue:)),
            bitrate: row["bitrate"], durationSeconds: row["duration_seconds"], errorCode: row["error_code"], errorMessage: row["error_message"],
            customName: row["custom_name"], customString: row["custom_string"], customNumber: row["custom_number"])
        let event = DeviceEvent(
            eventId: row["event_id"], sequence: row["sequence"], deviceTime: Date(millisecondsSince1970: row["device_time"]),
            appState: (row["app_state"] as String?).flatMap(AppState.init(rawValue:)), platform: row["platform"],
            sdkVersion: row["sdk_version"], appVersion: row["app_version"], userId: row["user_id"],
            externalDeviceId: row["external_device_id"], content: content)
        return EventRecord(
            rowId: row["id"], applicationId: row["application_id"], deviceId: row["device_id"], event: event,
            receivedAt: Date(millisecondsSince1970: row["received_at"]), correctedTime: Date(millisecondsSince1970: row["corrected_time"]))
    }
}
