import Foundation
import GRDB
import BackplaneWire

/// The license servers applications forward to.
extension SQLiteStore {
    public func setLicenseServer(_ server: LicenseServerRecord) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO license_servers (application_id, system, url, headers, updated_at) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (application_id, system) DO UPDATE SET url = excluded.url, headers = excluded.headers,
                        updated_at = excluded.updated_at
                    """,
                arguments: [server.applicationId, server.system, server.url, server.headersText, server.updatedAt.stored])
        }
    }

    public func deleteLicenseServer(applicationId: String, system: String) async throws -> Bool {
        try await write { db in
            try db.execute(sql: "DELETE FROM license_servers WHERE application_id = ? AND system = ?", arguments: [applicationId, system])
            return db.changesCount == 1
        }
    }

    public func licenseServers(applicationId: String) async throws -> [LicenseServerRecord] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT system, url, headers, updated_at FROM license_servers WHERE application_id = ? ORDER BY system",
                arguments: [applicationId]
            ).map { row in
                LicenseServerRecord(
                    applicationId: applicationId, system: row["system"], url: row["url"],
                    headers: try LicenseServerRecord.headers(from: row["headers"]), updatedAt: (row["updated_at"] as StoredDate).date)
            }
        }
    }
}
