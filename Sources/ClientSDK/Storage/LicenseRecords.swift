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
        try write { db in try Self.queueLicenseRelease(assetId: assetId, at: at, db) }
    }

    /// The same, inside the transaction that deletes the asset (`deleteAssets`,
    /// `removeDownloads`): a kill after it neither keeps the license nor loses its release.
    @discardableResult
    static func queueLicenseRelease(assetId: String, at: Date, _ db: Database) throws -> String? {
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

    /// Moves the held license `licenseId` (if held) to the releases to send.
    func queueLicenseRelease(licenseId: String, at: Date) throws {
        let assetId = try read { db in
            try String.fetchOne(db, sql: "SELECT asset_id FROM backplane_licenses WHERE license_id = ?", arguments: [licenseId])
        }
        if let assetId { try queueLicenseRelease(assetId: assetId, at: at) }
    }

    /// Whether the asset is queued or downloaded.
    func holdsAsset(_ assetId: String) throws -> Bool {
        try read { db in
            try Bool.fetchOne(db, sql: """
                SELECT EXISTS (SELECT 1 FROM downloads WHERE asset_id = ?) OR EXISTS (SELECT 1 FROM assets WHERE asset_id = ?)
                """, arguments: [assetId, assetId]) ?? false
        }
    }

    /// The grant the device holds of the asset, queued or completed, if any.
    func heldGrantId(assetId: String) throws -> String? {
        try read { db in
            try String.fetchOne(db, sql: """
                SELECT grant_id FROM downloads WHERE asset_id = ? AND grant_id IS NOT NULL
                UNION ALL SELECT grant_id FROM assets WHERE asset_id = ? AND grant_id IS NOT NULL LIMIT 1
                """, arguments: [assetId, assetId])
        }
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

/// The licenses a sync reports for renewal, and what its answer says of them.
extension SDKDatabase {
    /// Every license held, with its asset's first play (nil when none is held: the sync then
    /// carries nothing for licenses).
    func heldLicenses() throws -> [HeldLicense]? {
        let held = try read { db in
            try Row.fetchAll(db, sql: """
                SELECT l.license_id, a.first_played_at FROM backplane_licenses l LEFT JOIN assets a ON a.asset_id = l.asset_id
                ORDER BY l.license_id LIMIT \(WireLimits.maxLicensesPerSync)
                """).map { row in HeldLicense(licenseId: row["license_id"], firstPlayedAt: row["first_played_at"]) }
        }
        return held.isEmpty ? nil : held
    }

    /// A renewed license takes its new end (the asset's license state too, which its rights
    /// read); an ended one loses its keys in the same transaction, and the asset's license is
    /// `ended`. A license the answer does not name is left as it is.
    func applyLicenseRenewals(_ renewals: [LicenseRenewal]) throws {
        try write { db in
            for renewal in renewals {
                guard let row = try Row.fetchOne(
                    db, sql: "SELECT asset_id, answer FROM backplane_licenses WHERE license_id = ?", arguments: [renewal.licenseId])
                else { continue }
                let assetId: String = row["asset_id"]
                let state: LicenseState
                switch renewal.status {
                case .renewed:
                    guard var answer = try? Self.decoder.decode(LicenseIssueResponse.self, from: row["answer"] as Data) else { continue }
                    answer.expiresAt = renewal.expiresAt
                    try db.execute(
                        sql: "UPDATE backplane_licenses SET answer = ?, expires_at = ? WHERE license_id = ?",
                        arguments: [try Self.encoder.encode(answer), renewal.expiresAt, renewal.licenseId])
                    state = .acquired(until: renewal.expiresAt)
                case .ended:
                    try db.execute(sql: "DELETE FROM backplane_licenses WHERE license_id = ?", arguments: [renewal.licenseId])
                    state = .ended(reason: renewal.reason?.rawValue ?? "ended")
                default:
                    continue  // a status of a later backplane: the license stands until it ends
                }
                let data = try Self.encoder.encode(state)
                for table in ["downloads", "assets"] {
                    try db.execute(sql: "UPDATE \(table) SET license = ? WHERE asset_id = ?", arguments: [data, assetId])
                }
            }
        }
    }
}
