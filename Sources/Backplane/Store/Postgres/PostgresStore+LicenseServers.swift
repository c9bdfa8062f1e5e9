import Foundation
import PostgresNIO
import BackplaneWire

/// The license servers applications forward to.
extension PostgresStore {
    public func setLicenseServer(_ server: LicenseServerRecord) async throws {
        try await rows("""
            INSERT INTO license_servers (application_id, system, url, headers, updated_at)
            VALUES (\(server.applicationId), \(server.system), \(server.url), \(server.headersText), \(server.updatedAt))
            ON CONFLICT (application_id, system) DO UPDATE SET url = excluded.url, headers = excluded.headers, updated_at = excluded.updated_at
            """)
    }

    public func deleteLicenseServer(applicationId: String, system: String) async throws -> Bool {
        try await !rows("""
            DELETE FROM license_servers WHERE application_id = \(applicationId) AND system = \(system) RETURNING system
            """).isEmpty
    }

    public func licenseServers(applicationId: String) async throws -> [LicenseServerRecord] {
        try await rows("""
            SELECT system, url, headers, updated_at FROM license_servers WHERE application_id = \(applicationId) ORDER BY system
            """).records { row in
            LicenseServerRecord(
                applicationId: applicationId, system: try row("system"), url: try row("url"),
                headers: try LicenseServerRecord.headers(from: try row("headers")), updatedAt: try row("updated_at"))
        }
    }
}
