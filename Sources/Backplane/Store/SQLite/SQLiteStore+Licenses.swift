import Foundation
import GRDB
import BackplaneWire

/// Licenses, issued in the permission's transaction, and devices' agreement keys.
extension SQLiteStore {
    public func setAgreementKey(applicationId: String, deviceId: String, publicKey: Data, at: Date) async throws -> Bool {
        try await write { db in
            guard let device = try Self.device(db, applicationId: applicationId, deviceId: deviceId), device.isRegistered else { return false }
            try db.execute(
                sql: """
                    INSERT INTO agreement_keys (application_id, device_id, public_key, set_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (application_id, device_id) DO UPDATE SET public_key = excluded.public_key, set_at = excluded.set_at
                    """,
                arguments: [applicationId, deviceId, publicKey, at.stored])
            return true
        }
    }

    public func issueLicense<Decision: Sendable>(
        applicationId: String, deviceId: String, assetId: String, grantId: String?,
        decide: @escaping @Sendable (LicenseDoorState) throws -> (LicenseIssue?, Decision)
    ) async throws -> Decision {
        try await write { db in
            let permission = try Self.permissionState(db, applicationId: applicationId, deviceId: deviceId, assetId: assetId)
            // Statements prepared once: this runs while no other write can (as `permissionState`).
            let named = try grantId.flatMap { grantId in
                try DownloadGrantRecord.fetchOne(
                    db.cachedStatement(sql: "SELECT * FROM download_grants WHERE application_id = ? AND grant_id = ? AND device_id = ?"),
                    arguments: [applicationId, grantId, deviceId])
            }
            let heldLicense = try permission.held.flatMap { held in
                try Row.fetchOne(db.cachedStatement(sql: Self.heldLicenseSQL), arguments: [held.grantId, deviceId]).map(LicenseRecord.init(row:))
            }
            let state = LicenseDoorState(
                permission: permission, named: named, heldLicense: heldLicense,
                contentKeys: try ContentKeyRecord.fetchAll(
                    db.cachedStatement(sql: "SELECT * FROM content_keys WHERE application_id = ? AND asset_id = ? ORDER BY created_at, kid"),
                    arguments: [applicationId, assetId]),
                agreementKey: try Data.fetchOne(
                    db.cachedStatement(sql: "SELECT public_key FROM agreement_keys WHERE application_id = ? AND device_id = ?"),
                    arguments: [applicationId, deviceId]))
            let (issue, decision) = try decide(state)
            if let issue {
                if var grant = issue.grant { try grant.insert(db) }
                try Self.insert(db, issue.license)
            }
            return decision
        }
    }

    public func releaseLicense<Decision: Sendable>(
        applicationId: String, deviceId: String, licenseId: String,
        decide: @escaping @Sendable (LicenseRecord?, DownloadGrantRecord?) throws -> (LicenseRecord?, DownloadGrantRecord?, Decision)
    ) async throws -> Decision {
        try await write { db in
            let license = try Row.fetchOne(
                db, sql: "SELECT \(Self.licenseColumns) FROM licenses WHERE application_id = ? AND license_id = ? AND device_id = ?",
                arguments: [applicationId, licenseId, deviceId]
            ).map(LicenseRecord.init(row:))
            let grant = try license.flatMap { license in
                try DownloadGrantRecord.filter { $0.applicationId == applicationId && $0.grantId == license.grantId }.fetchOne(db)
            }
            let (newLicense, newGrant, decision) = try decide(license, grant)
            if let newLicense {
                try db.execute(
                    sql: "UPDATE licenses SET renewed_at = ?, expires_at = ?, released_at = ? WHERE license_id = ?",
                    arguments: [newLicense.renewedAt.stored, newLicense.expiresAt.stored, newLicense.releasedAt.stored, newLicense.licenseId])
            }
            if let newGrant { try newGrant.update(db) }
            return decision
        }
    }

    public func renewLicenses<Decision: Sendable>(
        applicationId: String, deviceId: String, licenseIds: [String],
        decide: @escaping @Sendable ([(license: LicenseRecord, grant: DownloadGrantRecord?)]) throws -> ([LicenseRecord], Decision)
    ) async throws -> Decision {
        try await write { db in
            var held: [(license: LicenseRecord, grant: DownloadGrantRecord?)] = []
            for licenseId in licenseIds {
                guard let license = try Row.fetchOne(
                    db, sql: "SELECT \(Self.licenseColumns) FROM licenses WHERE application_id = ? AND license_id = ? AND device_id = ?",
                    arguments: [applicationId, licenseId, deviceId]
                ).map(LicenseRecord.init(row:)) else { continue }
                let grant = try DownloadGrantRecord.filter { $0.applicationId == applicationId && $0.grantId == license.grantId }.fetchOne(db)
                held.append((license, grant))
            }
            let (renewed, decision) = try decide(held)
            for license in renewed {
                try db.execute(
                    sql: "UPDATE licenses SET renewed_at = ?, expires_at = ? WHERE license_id = ?",
                    arguments: [license.renewedAt.stored, license.expiresAt.stored, license.licenseId])
            }
            return decision
        }
    }

    public func licenses(
        applicationId: String, deviceId: String, limit: Int
    ) async throws -> [(license: LicenseRecord, grantState: DownloadGrantState?)] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.licenseColumns.split(separator: ",").map { "l." + $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ", ")),
                        g.state AS grant_state
                    FROM licenses l LEFT JOIN download_grants g ON g.grant_id = l.grant_id
                    WHERE l.application_id = ? AND l.device_id = ? ORDER BY l.issued_at DESC, l.license_id LIMIT ?
                    """,
                arguments: [applicationId, deviceId, limit]
            ).map { row in
                (try LicenseRecord(row: row), (row["grant_state"] as String?).map(DownloadGrantState.init(rawValue:)))
            }
        }
    }

    static let licenseColumns =
        "license_id, application_id, device_id, user_id, asset_id, grant_id, system, kids, issued_at, renewed_at, expires_at, released_at"

    /// The newest unreleased license of a grant the device holds.
    private static let heldLicenseSQL = """
        SELECT \(licenseColumns) FROM licenses WHERE grant_id = ? AND device_id = ? AND released_at IS NULL
        ORDER BY issued_at DESC, license_id DESC LIMIT 1
        """

    private static let insertLicenseSQL = "INSERT INTO licenses (\(licenseColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

    private static func insert(_ db: Database, _ license: LicenseRecord) throws {
        try db.cachedStatement(sql: insertLicenseSQL).execute(
            arguments: [
                license.licenseId, license.applicationId, license.deviceId, license.userId, license.assetId, license.grantId,
                license.system.rawValue, license.kids.joined(separator: ","), license.issuedAt.stored, license.renewedAt.stored,
                license.expiresAt.stored, license.releasedAt.stored,
            ])
    }
}

extension LicenseRecord {
    init(row: Row) throws {
        let kids: String = row["kids"]
        self.init(
            licenseId: row["license_id"], applicationId: row["application_id"], deviceId: row["device_id"], userId: row["user_id"],
            assetId: row["asset_id"], grantId: row["grant_id"], system: LicenseSystem(rawValue: row["system"]),
            kids: kids.isEmpty ? [] : kids.split(separator: ",").map(String.init), issuedAt: row["issued_at"], renewedAt: row["renewed_at"],
            expiresAt: row["expires_at"], releasedAt: row["released_at"])
    }
}
