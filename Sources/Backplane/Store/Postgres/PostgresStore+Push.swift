import Foundation
import PostgresNIO
import BackplaneWire

/// Push credentials and the last push of each device.
extension PostgresStore {
    public func pushCredentials(applicationId: String) async throws -> [PushCredentialsRecord] {
        try await rows("""
            SELECT application_id, provider, secret, set_at, broken_at, broken_reason FROM push_credentials
            WHERE application_id = \(applicationId) ORDER BY provider
            """).records(PushCredentialsRecord.init)
    }

    public func setPushCredentials(_ record: PushCredentialsRecord) async throws {
        try await rows("""
            INSERT INTO push_credentials (application_id, provider, secret, set_at, broken_at, broken_reason)
            VALUES (\(record.applicationId), \(record.provider.rawValue), \(record.secret), \(record.setAt), \(record.brokenAt), \(record.brokenReason))
            ON CONFLICT (application_id, provider) DO UPDATE SET secret = excluded.secret, set_at = excluded.set_at,
                broken_at = excluded.broken_at, broken_reason = excluded.broken_reason
            """)
    }

    public func deletePushCredentials(applicationId: String, provider: PushProvider) async throws -> Bool {
        try await !rows("""
            DELETE FROM push_credentials WHERE application_id = \(applicationId) AND provider = \(provider.rawValue) RETURNING 1
            """).isEmpty
    }

    public func markPushCredentialsBroken(
        applicationId: String, provider: PushProvider, setAt: Date, broken: PushCredentialsBroken
    ) async throws -> Bool {
        try await !rows("""
            UPDATE push_credentials SET broken_at = \(broken.since), broken_reason = \(broken.reason)
            WHERE application_id = \(applicationId) AND provider = \(provider.rawValue) AND set_at = \(setAt) AND broken_at IS NULL
            RETURNING 1
            """).isEmpty
    }

    public func claimPush(applicationId: String, deviceId: String, now: Date, spacing: Duration) async throws -> PushClaim {
        let nowMs = now.millisecondsSince1970
        let spacingMs = spacing.wholeMilliseconds
        // One statement: of two nodes claiming at once, the row lock lets one update and the
        // other then sees the new time and is refused. The last push time comes back either way.
        let rows = try await rows("""
            WITH claimed AS (
                INSERT INTO device_pushes (application_id, device_id, pushed_at) VALUES (\(applicationId), \(deviceId), \(nowMs))
                ON CONFLICT (application_id, device_id) DO UPDATE SET pushed_at = excluded.pushed_at
                WHERE device_pushes.pushed_at <= excluded.pushed_at - \(spacingMs)
                RETURNING pushed_at)
            SELECT true, pushed_at FROM claimed
            UNION ALL
            SELECT false, pushed_at FROM device_pushes
            WHERE application_id = \(applicationId) AND device_id = \(deviceId) AND NOT EXISTS (SELECT 1 FROM claimed)
            """)
        // No row at all: a claim by another node committed after this statement's snapshot,
        // which the conflict saw and the plain read does not. It is a push just now.
        guard let row = rows.first else { return .refused(lastPushAt: now) }
        let (granted, last) = try row.decode((Bool, Int64).self)
        return granted ? .granted : .refused(lastPushAt: Date(millisecondsSince1970: last))
    }
}

extension PushCredentialsRecord {
    init(_ row: StoredRow) throws {
        self.init(
            applicationId: try row("application_id"), provider: try row.value("provider"), secret: try row("secret"),
            setAt: try row("set_at"), brokenAt: try row("broken_at"), brokenReason: try row("broken_reason"))
    }
}
