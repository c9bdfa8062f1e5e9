import Foundation
import GRDB
import BackplaneWire

/// What the rights of a completed asset are judged on, as stored with it.
struct StoredRights: Sendable, Equatable {
    var assetId: String
    var request: DownloadRequest?
    var grantId: String?
    /// The window the backplane granted, if a permission was asked.
    var grantedWindow: DownloadWindow?
    var license: LicenseState?
    /// When the download completed: trusted time when there was any, else the device's clock.
    var downloadedAt: Date
    var firstPlayedAt: Date?
}

/// Rights of queued and completed assets in the SDK database.
extension SDKDatabase {
    /// The completed assets' rights (one asset, or all).
    func storedRights(assetId: String? = nil) throws -> [StoredRights] {
        let sql = "SELECT asset_id, request, grant_id, window, license, added_at, downloaded_at, first_played_at FROM assets"
        return try read { db in
            let rows = try assetId.map { try Row.fetchAll(db, sql: sql + " WHERE asset_id = ?", arguments: [$0]) }
                ?? Row.fetchAll(db, sql: sql + " ORDER BY added_at, asset_id")
            return try rows.map { row in
                try StoredRights(
                    assetId: row.decode(forColumn: "asset_id"), request: try Self.decodeColumn(DownloadRequest.self, row.decode(forColumn: "request")), grantId: row.decode(forColumn: "grant_id"),
                    grantedWindow: try Self.decodeColumn(DownloadWindow.self, row.decode(forColumn: "window")),
                    license: try Self.decodeColumn(LicenseState.self, row.decode(forColumn: "license")),
                    downloadedAt: row.decode(forColumn: "downloaded_at") ?? row.decode(forColumn: "added_at"), firstPlayedAt: row.decode(forColumn: "first_played_at"))
            }
        }
    }

    /// Records the first play of a completed asset, or of one in the queue (played while it
    /// downloads); later plays change nothing. False when the asset is neither.
    func recordFirstPlay(assetId: String, at date: Date) throws -> Bool {
        try write { db in
            for table in ["assets", "downloads"] {
                try db.execute(
                    sql: "UPDATE \(table) SET first_played_at = COALESCE(first_played_at, ?) WHERE asset_id = ?", arguments: [date, assetId])
                if db.changesCount > 0 { return true }
            }
            return false
        }
    }

    /// The assets of the queue (`downloads`) or on the device (`assets`) that hold an acquired
    /// license; only the license column is read.
    func assetIdsHoldingLicense(queued: Bool) throws -> Set<String> {
        let table = queued ? "downloads" : "assets"
        return try read { db in
            var ids: Set<String> = []
            for row in try Row.fetchAll(db, sql: "SELECT asset_id, license FROM \(table) WHERE license IS NOT NULL") {
                if try Self.decodeColumn(LicenseState.self, row.decode(forColumn: "license"))?.isAcquired == true { ids.insert(try row.decode(forColumn: "asset_id")) }
            }
            return ids
        }
    }

    /// Stores a queued or completed asset's license state.
    func recordLicense(_ license: LicenseState, assetId: String) throws {
        let data = try Self.encoder.encode(license)
        try write { db in
            for table in ["downloads", "assets"] {
                try db.execute(sql: "UPDATE \(table) SET license = ? WHERE asset_id = ?", arguments: [data, assetId])
            }
        }
    }

    /// The CMS changed an asset's availability (an episode update): the queued or completed
    /// asset's request takes it, so that a new expiry date applies after the download too.
    func updateAvailability(_ availability: AssetAvailability?, assetId: String) throws {
        try write { db in
            for table in ["downloads", "assets"] {
                guard let data = try Data.fetchOne(db, sql: "SELECT request FROM \(table) WHERE asset_id = ?", arguments: [assetId]) else {
                    continue
                }
                var request = try Self.decoder.decode(DownloadRequest.self, from: data)
                guard request.availability != availability else { continue }
                request.availability = availability
                try db.execute(
                    sql: "UPDATE \(table) SET request = ? WHERE asset_id = ?", arguments: [try Self.encoder.encode(request), assetId])
            }
        }
    }

    private static func decodeColumn<Value: Decodable>(_ type: Value.Type, _ data: Data?) throws -> Value? {
        try data.map { try decoder.decode(type, from: $0) }
    }
}
