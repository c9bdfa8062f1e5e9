import Foundation
import GRDB
import BackplaneWire

/// Push credentials and the last push of each device.
extension SQLiteStore {
    public func pushCredentials(applicationId: String) async throws -> [PushCredentialsRecord] {
        try await read { db in
            try PushCredentialsRecord.filter(Column("application_id") == applicationId).order(Column("provider")).fetchAll(db)
        }
    }

    public func setPushCredentials(_ record: PushCredentialsRecord) async throws {
        try await write { db in
            var record = record
            try record.upsert(db)
        }
    }

    public func deletePushCredentials(applicationId: String, provider: PushProvider) async throws -> Bool {
        try await write { db in
            try PushCredentialsRecord.deleteOne(db, key: ["application_id": applicationId, "provider": provider.rawValue])
        }
    }

    public func markPushCredentialsBroken(
        applicationId: String, provider: PushProvider, setAt: Date, broken: PushCredentialsBroken
    ) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE push_credentials SET broken_at = ?, broken_reason = ?
                    WHERE application_id = ? AND provider = ? AND set_at = ? AND broken_at IS NULL
                    """,
                arguments: [broken.since.stored, broken.reason, applicationId, provider.rawValue, setAt.stored])
            return db.changesCount > 0
        }
    }

    public func claimPush(applicationId: String, deviceId: String, now: Date, spacing: Duration) async throws -> PushClaim {
        let nowMs = now.millisecondsSince1970
        let spacingMs = spacing.wholeMilliseconds
        return try await write { db in
            // The row is written only when the last push is old enough: one statement, so two
            // claims at once cannot both be granted.
            let granted = try Int64.fetchOne(db, sql: """
                INSERT INTO device_pushes (application_id, device_id, pushed_at) VALUES (?, ?, ?)
                ON CONFLICT (application_id, device_id) DO UPDATE SET pushed_at = excluded.pushed_at
                WHERE device_pushes.pushed_at <= excluded.pushed_at - ?
                RETURNING pushed_at
                """, arguments: [applicationId, deviceId, nowMs, spacingMs])
            if granted != nil { return .granted }
            let last = try Int64.fetchOne(
                db, sql: "SELECT pushed_at FROM device_pushes WHERE application_id = ? AND device_id = ?", arguments: [applicationId, deviceId])
            return .refused(lastPushAt: Date(millisecondsSince1970: last ?? nowMs))
        }
    }
}
