import Foundation
import GRDB
import BackplaneWire

/// The licenses the backplane issued (`BackplaneLicenses`), kept as they came: the keys inside
/// are wrapped for the device's agreement key. A deleted asset's license becomes a release to
/// send, in one transaction, so a kill between the two loses neither.
extension SDKDatabase {
    func saveBackplaneLicense(_ answer: LicenseIssueResponse, assetId: String) throws {
        let data = try Self.encoder.encode(answer)
        try write { db in
            try db.execute(
                sql: """
                    INSERT INTO backplane_licenses (asset_id, license_id, grant_id, answer, expires_at) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (asset_id) DO UPDATE SET license_id = excluded.license_id, grant_id = excluded.grant_id,
                        answer = excluded.answer, expires_at = excluded.expires_at
                    """,
                arguments: [assetId, answer.licenseId, answer.grantId, data, answer.expiresAt])
        }
    }

    func backplaneLicense(assetId: String) throws -> LicenseIssueResponse? {
        try read { db in
            try Data.fetchOne(db, sql: "SELECT answer FROM backplane_licenses WHERE asset_id = ?", arguments: [assetId])
        }.flatMap { try? Self.decoder.decode(LicenseIssueResponse.self, from: $0) }
    }

    /// Moves the asset's license (if any) to the releases to send; returns its id.
    @discardableResult
    func queueLicenseRelease(assetId: String, at: Date) throws -> String? {
        try write { db in
            guard let data = try Data.fetchOne(db, sql: "SELECT answer FROM backplane_licenses WHERE asset_id = ?", arguments: [assetId])
            else { return nil }
            try db.execute(sql: "DELETE FROM backplane_licenses WHERE asset_id = ?", arguments: [assetId])
            guard let answer = try? Self.decoder.decode(LicenseIssueResponse.self, from: data) else { return nil }
            let kids = answer.clearKey?.keys.map(\.kid).joined(separator: ",") ?? ""
            try db.execute(
                sql: "INSERT OR IGNORE INTO license_releases (license_id, kids, queued_at) VALUES (?, ?, ?)",
                arguments: [answer.licenseId, kids, at])
            return answer.licenseId
        }
    }

    /// Licenses whose asset is gone (deleted while the engine was killed before it queued the
    /// release): queued now.
    func queueOrphanedLicenseReleases(at: Date) throws {
        let orphaned = try read { db in
            try String.fetchAll(db, sql: """
                SELECT asset_id FROM backplane_licenses
                WHERE asset_id NOT IN (SELECT asset_id FROM downloads) AND asset_id NOT IN (SELECT asset_id FROM assets)
                """)
        }
        for assetId in orphaned { try queueLicenseRelease(assetId: assetId, at: at) }
    }

    /// Releases not yet acknowledged, oldest first.
    func pendingLicenseReleases() throws -> [(licenseId: String, kids: [String])] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT license_id, kids FROM license_releases ORDER BY queued_at, license_id").map { row in
                let kids: String = row["kids"]
                return (row["license_id"], kids.isEmpty ? [] : kids.split(separator: ",").map(String.init))
            }
        }
    }

    func forgetLicenseRelease(_ licenseId: String) throws {
        try write { db in try db.execute(sql: "DELETE FROM license_releases WHERE license_id = ?", arguments: [licenseId]) }
    }
}
