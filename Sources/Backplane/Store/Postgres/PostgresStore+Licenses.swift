import Foundation
import PostgresNIO
import BackplaneWire

/// Licenses, issued in the permission's transaction (under the device's and the user's locks),
/// and devices' agreement keys.
extension PostgresStore {
    static let licenseColumns =
        "license_id, application_id, device_id, user_id, asset_id, grant_id, system, kids, issued_at, renewed_at, expires_at, released_at"

    public func setAgreementKey(applicationId: String, deviceId: String, publicKey: Data, at: Date) async throws -> Bool {
        try await transaction { [logger] connection in
            guard let device = try await Self.device(connection, applicationId: applicationId, deviceId: deviceId, logger: logger),
                device.isRegistered
            else { return false }
            try await connection.run("""
                INSERT INTO agreement_keys (application_id, device_id, public_key, set_at) VALUES (\(applicationId), \(deviceId), \(publicKey), \(at))
                ON CONFLICT (application_id, device_id) DO UPDATE SET public_key = excluded.public_key, set_at = excluded.set_at
                """, logger: logger)
            return true
        }
    }

    public func issueLicense<Decision: Sendable>(
        applicationId: String, deviceId: String, assetId: String, grantId: String?,
        decide: @escaping @Sendable (LicenseDoorState) throws -> (LicenseIssue?, Decision)
    ) async throws -> Decision {
        try await transaction { [logger] connection in
            let permission = try await Self.permissionState(
                connection, applicationId: applicationId, deviceId: deviceId, assetId: assetId, logger: logger)
            var named: DownloadGrantRecord?
            if let grantId {
                named = try await connection.rows("""
                    SELECT \(unescaped: PostgresColumns.grant) FROM download_grants
                    WHERE application_id = \(applicationId) AND grant_id = \(grantId) AND device_id = \(deviceId)
                    """, logger: logger).records(DownloadGrantRecord.init).first
            }
            var heldLicense: LicenseRecord?
            if let held = permission.held {
                heldLicense = try await connection.rows("""
                    SELECT \(unescaped: Self.licenseColumns) FROM licenses
                    WHERE grant_id = \(held.grantId) AND device_id = \(deviceId) AND released_at IS NULL
                    ORDER BY issued_at DESC, license_id DESC LIMIT 1
                    """, logger: logger).records(LicenseRecord.init).first
            }
            let keys = try await connection.rows("""
                SELECT application_id, asset_id, kid, sealed_key, sealed_with, created_at FROM content_keys
                WHERE application_id = \(applicationId) AND asset_id = \(assetId) ORDER BY created_at, kid
                """, logger: logger).records(ContentKeyRecord.init)
            let agreementKey = try await connection.rows("""
                SELECT public_key FROM agreement_keys WHERE application_id = \(applicationId) AND device_id = \(deviceId)
                """, logger: logger).first?.decode(Data.self)
            let (issue, decision) = try decide(
                LicenseDoorState(permission: permission, named: named, heldLicense: heldLicense, contentKeys: keys, agreementKey: agreementKey))
            if let issue {
                if let grant = issue.grant { try await Self.insert(connection, grant, logger: logger) }
                let l = issue.license
                try await connection.run("""
                    INSERT INTO licenses (\(unescaped: Self.licenseColumns))
                    VALUES (\(l.licenseId), \(l.applicationId), \(l.deviceId), \(l.userId), \(l.assetId), \(l.grantId), \(l.system.rawValue),
                            \(l.kids.joined(separator: ",")), \(l.issuedAt), \(l.renewedAt), \(l.expiresAt), \(l.releasedAt))
                    """, logger: logger)
            }
            return decision
        }
    }

    public func releaseLicense<Decision: Sendable>(
        applicationId: String, deviceId: String, licenseId: String,
        decide: @escaping @Sendable (LicenseRecord?, DownloadGrantRecord?) throws -> (LicenseRecord?, DownloadGrantRecord?, Decision)
    ) async throws -> Decision {
        try await transaction { [logger] connection in
            try await Self.lockDevice(connection, applicationId: applicationId, deviceId: deviceId, logger: logger)
            let license = try await connection.rows("""
                SELECT \(unescaped: Self.licenseColumns) FROM licenses
                WHERE application_id = \(applicationId) AND license_id = \(licenseId) AND device_id = \(deviceId)
                """, logger: logger).records(LicenseRecord.init).first
            var grant: DownloadGrantRecord?
            if let license {
                grant = try await connection.rows("""
                    SELECT \(unescaped: PostgresColumns.grant) FROM download_grants
                    WHERE application_id = \(applicationId) AND grant_id = \(license.grantId)
                    """, logger: logger).records(DownloadGrantRecord.init).first
            }
            let (newLicense, newGrant, decision) = try decide(license, grant)
            if let l = newLicense {
                try await connection.run("""
                    UPDATE licenses SET renewed_at = \(l.renewedAt), expires_at = \(l.expiresAt), released_at = \(l.releasedAt)
                    WHERE license_id = \(l.licenseId)
                    """, logger: logger)
            }
            if let newGrant { try await Self.updateState(connection, newGrant, logger: logger) }
            return decision
        }
    }

    public func renewLicenses<Decision: Sendable>(
        applicationId: String, deviceId: String, licenseIds: [String],
        decide: @escaping @Sendable ([(license: LicenseRecord, grant: DownloadGrantRecord?)]) throws -> ([LicenseRecord], Decision)
    ) async throws -> Decision {
        try await transaction { [logger] connection in
            try await Self.lockDevice(connection, applicationId: applicationId, deviceId: deviceId, logger: logger)
            let licenses = try await connection.rows("""
                SELECT \(unescaped: Self.licenseColumns) FROM licenses
                WHERE application_id = \(applicationId) AND device_id = \(deviceId) AND license_id = ANY(\(licenseIds))
                """, logger: logger).records(LicenseRecord.init)
            let grantIds = Array(Set(licenses.map(\.grantId)))
            let grants = try await connection.rows("""
                SELECT \(unescaped: PostgresColumns.grant) FROM download_grants WHERE application_id = \(applicationId) AND grant_id = ANY(\(grantIds))
                """, logger: logger).records(DownloadGrantRecord.init)
            let byId = Dictionary(uniqueKeysWithValues: licenses.map { ($0.licenseId, $0) })
            // In the order asked, as the SQLite store reads them.
            let held = licenseIds.compactMap { id in byId[id].map { license in (license, grants.first { $0.grantId == license.grantId }) } }
            let (renewed, decision) = try decide(held)
            for l in renewed {
                try await connection.run(
                    "UPDATE licenses SET renewed_at = \(l.renewedAt), expires_at = \(l.expiresAt) WHERE license_id = \(l.licenseId)", logger: logger)
            }
            return decision
        }
    }

    public func licenses(
        applicationId: String, deviceId: String, limit: Int
    ) async throws -> [(license: LicenseRecord, grantState: DownloadGrantState?)] {
        let columns = Self.licenseColumns.split(separator: ",").map { "l." + $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ", ")
        return try await rows("""
            SELECT \(unescaped: columns), g.state AS grant_state
            FROM licenses l LEFT JOIN download_grants g ON g.grant_id = l.grant_id
            WHERE l.application_id = \(applicationId) AND l.device_id = \(deviceId) ORDER BY l.issued_at DESC, l.license_id LIMIT \(limit)
            """).records { row in
            (try LicenseRecord(row), try row("grant_state", as: String?.self).map(DownloadGrantState.init(rawValue:)))
        }
    }
}

extension LicenseRecord {
    init(_ row: StoredRow) throws {
        let kids: String = try row("kids")
        self.init(
            licenseId: try row("license_id"), applicationId: try row("application_id"), deviceId: try row("device_id"),
            userId: try row("user_id"), assetId: try row("asset_id"), grantId: try row("grant_id"),
            system: LicenseSystem(rawValue: try row("system")), kids: kids.isEmpty ? [] : kids.split(separator: ",").map(String.init),
            issuedAt: try row("issued_at"), renewedAt: try row("renewed_at"), expiresAt: try row("expires_at"),
            releasedAt: try row("released_at"))
    }
}
