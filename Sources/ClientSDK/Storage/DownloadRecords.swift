import Foundation
import GRDB

/// A completed asset the SDK holds: its record and its files under the content directory.
public struct LocalAsset: Sendable, Equatable, Codable {
    public var assetId: String
    /// What to play, relative to `<dataDirectory>/content`: the file, or an HLS asset's local
    /// master playlist.
    public var relativePath: String
    /// Bytes of all its files.
    public var size: Int64
    public var addedAt: Date
    /// The download it came from; nil for a file the app copied in (`addDownloadedAsset`).
    public var request: DownloadRequest?
    /// The backplane's grant of its download, when one was asked for.
    public internal(set) var grantId: String?

    public init(assetId: String, relativePath: String, size: Int64, addedAt: Date, request: DownloadRequest? = nil) {
        self.assetId = assetId
        self.relativePath = relativePath
        self.size = size
        self.addedAt = addedAt
        self.request = request
    }
}

/// An asset in the download queue as stored: everything but the engine's view of it now.
struct QueuedDownload: Sendable, Equatable {
    var request: DownloadRequest
    /// Its place in the queue, 0 first.
    var position: Int
    var paused = false
    /// Failed for good (rule of threes, or a fatal failure) until the app clears its retries.
    var failed = false
    var errorCount = 0
    var lastFailure: DownloadFailure?
    var bytesDownloaded: Int64 = 0
    var expectedBytes: Int64?
    var expectedIsEstimate = false
    var addedAt: Date
    /// The backplane's grant for this download, once asked and granted, and its window.
    var grantId: String?
    var window: DownloadWindow?
    /// The license provider's answer, once asked (a failure is asked again).
    var license: LicenseState?
    /// The backplane's last denial, until a grant replaces it.
    var denial: DownloadDenial?
    /// Its first play through the playback server while it downloaded (trusted time).
    var firstPlayedAt: Date?
    /// What it will take on the device, worked out before its download starts (`SizeEstimator`).
    var estimatedBytes: Int64?
    /// What the estimate rests on.
    var estimateBasis = EstimateBasis.bandwidth

    var assetId: String { request.assetId }

    /// The estimate the storage rules hold the asset to before it starts: one from the sizes
    /// the origin stated; not one from bandwidths alone (manifests state peaks, and may misstate
    /// them), nor one extrapolated past what any storage could hold. Without one, the download's
    /// own checks judge the asset as its bytes arrive.
    func estimateToFit(ceiling: Int64) -> Int64? {
        guard let estimatedBytes else { return nil }
        switch estimateBasis {
        case .exact: return estimatedBytes
        case .measured: return estimatedBytes <= ceiling ? estimatedBytes : nil
        case .bandwidth: return nil
        }
    }
}

/// The download queue and the completed assets in the SDK database. Every change is one
/// transaction, so a kill leaves the queue as it was before or after it.
extension SDKDatabase {
    // MARK: completed assets

    func insertAsset(_ asset: LocalAsset) throws {
        let request = try asset.request.map { try Self.encoder.encode($0) }
        try write { db in try Self.insertAsset(asset, request: request, db) }
    }

    func assets() throws -> [LocalAsset] {
        try read { db in try Self.fetchAssets(db, where: nil) }
    }

    func asset(assetId: String) throws -> LocalAsset? {
        try read { db in try Self.fetchAssets(db, where: assetId).first }
    }

    /// Deletes the records of these assets (all of them when nil); returns the ones that existed.
    func deleteAssets(_ assetIds: [String]?) throws -> [LocalAsset] {
        try write { db in
            let all = try Self.fetchAssets(db, where: nil)
            let doomed = assetIds.map { ids in all.filter { ids.contains($0.assetId) } } ?? all
            let now = Date()
            for asset in doomed {
                try Self.reportGrant(ofAsset: asset.assetId, in: "assets", .deleted, db)
                try db.execute(sql: "DELETE FROM assets WHERE asset_id = ?", arguments: [asset.assetId])
                if try !Self.isQueued(asset.assetId, db) { try Self.queueLicenseRelease(assetId: asset.assetId, at: now, db) }
            }
            return doomed
        }
    }

    private static func isQueued(_ assetId: String, _ db: Database) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM downloads WHERE asset_id = ?)", arguments: [assetId]) ?? false
    }

    private static func insertAsset(_ asset: LocalAsset, request: Data?, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO assets (asset_id, relative_path, size, added_at, request) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(asset_id) DO UPDATE SET relative_path = excluded.relative_path, size = excluded.size,
                  added_at = excluded.added_at, request = excluded.request,
                  window = NULL, license = NULL, downloaded_at = NULL, first_played_at = NULL
                """,
            arguments: [asset.assetId, asset.relativePath, asset.size, asset.addedAt, request])
    }

    static func fetchAssets(_ db: Database, where assetId: String?) throws -> [LocalAsset] {
        let sql = "SELECT asset_id, relative_path, size, added_at, request, grant_id FROM assets"
        let rows = try assetId.map { try Row.fetchAll(db, sql: sql + " WHERE asset_id = ?", arguments: [$0]) }
            ?? Row.fetchAll(db, sql: sql + " ORDER BY added_at, asset_id")
        return try rows.map { row in
            var asset = try LocalAsset(
                assetId: row.decode(forColumn: "asset_id"), relativePath: row.decode(forColumn: "relative_path"), size: row.decode(forColumn: "size"), addedAt: row.decode(forColumn: "added_at"),
                request: try (try row.decode(Data?.self, forColumn: "request")).map { try decoder.decode(DownloadRequest.self, from: $0) })
            asset.grantId = try row.decode(forColumn: "grant_id")
            return asset
        }
    }

    // MARK: the queue

    /// The queue in order.
    func queuedDownloads() throws -> [QueuedDownload] {
        try read { db in try Self.fetchQueue(db) }
    }

    func queuedDownload(assetId: String) throws -> QueuedDownload? {
        try read { db in try Self.fetchQueue(db, assetId: assetId).first }
    }

    /// Adds `request` at `index` (nil: at the end), unless the asset is queued or completed
    /// already; returns whether it was added.
    func enqueueDownload(_ request: DownloadRequest, at index: Int?, estimate: (bytes: Int64, basis: EstimateBasis)? = nil) throws -> Bool {
        let data = try Self.encoder.encode(request)
        return try write { db in
            let known = try Bool.fetchOne(
                db, sql: "SELECT EXISTS (SELECT 1 FROM downloads WHERE asset_id = ?) OR EXISTS (SELECT 1 FROM assets WHERE asset_id = ?)",
                arguments: [request.assetId, request.assetId]) ?? false
            guard !known else { return false }
            try Self.insertDownload(request.assetId, request: data, at: index, estimate: estimate, db)
            return true
        }
    }

    /// A new row of the queue at `index` (nil: at the end).
    static func insertDownload(_ assetId: String, request: Data, at index: Int?, estimate: (bytes: Int64, basis: EstimateBasis)? = nil, _ db: Database) throws {
        // Positions may have gaps (removals leave them); only the rows after the new one move.
        let position: Int
        if let index, let taken = try Int.fetchOne(
            db, sql: "SELECT position FROM downloads ORDER BY position LIMIT 1 OFFSET ?", arguments: [max(index, 0)]) {
            try db.execute(sql: "UPDATE downloads SET position = position + 1 WHERE position >= ?", arguments: [taken])
            position = taken
        } else {
            position = (try Int.fetchOne(db, sql: "SELECT MAX(position) FROM downloads") ?? -1).addingClamped(1)
        }
        try db.execute(
            sql: "INSERT INTO downloads (asset_id, position, request, added_at, estimated_bytes, estimate_basis) VALUES (?, ?, ?, ?, ?, ?)",
            arguments: [assetId, position, request, Date(), estimate?.bytes, (estimate?.basis ?? .bandwidth).rawValue])
    }

    /// Moves a queued asset to `index`; returns whether it is queued.
    func moveDownload(assetId: String, to index: Int) throws -> Bool {
        try write { db in
            var order = try String.fetchAll(db, sql: "SELECT asset_id FROM downloads ORDER BY position")
            guard let from = order.firstIndex(of: assetId) else { return false }
            order.remove(at: from)
            order.insert(assetId, at: min(max(index, 0), order.count))
            try Self.renumber(order, db)
            return true
        }
    }

    /// Replaces a queued asset's request (a new URL); false when the asset is not queued.
    @discardableResult
    func replaceDownloadRequest(_ request: DownloadRequest) throws -> Bool {
        let data = try Self.encoder.encode(request)
        return try write { db in
            try db.execute(sql: "UPDATE downloads SET request = ? WHERE asset_id = ?", arguments: [data, request.assetId])
            return db.changesCount > 0
        }
    }

    /// Removes these assets from the queue (all when nil); returns the ones that were queued.
    func removeDownloads(_ assetIds: [String]?) throws -> [String] {
        try write { db in
            let queued = try String.fetchAll(db, sql: "SELECT asset_id FROM downloads ORDER BY position")
            let doomed = assetIds.map { ids in queued.filter(ids.contains) } ?? queued
            let now = Date()
            for assetId in doomed {
                try Self.reportGrant(ofAsset: assetId, in: "downloads", .deleted, db)
                try db.execute(sql: "DELETE FROM downloads WHERE asset_id = ?", arguments: [assetId])
                // A completed copy of the asset keeps its license.
                let completed = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM assets WHERE asset_id = ?)", arguments: [assetId]) ?? false
                if !completed { try Self.queueLicenseRelease(assetId: assetId, at: now, db) }
            }
            return doomed
        }
    }

    /// The ids of the assets that may download (not paused, not failed), in queue order.
    func runnableDownloadIds() throws -> [String] {
        try read { db in
            try String.fetchAll(db, sql: "SELECT asset_id FROM downloads WHERE NOT paused AND NOT failed ORDER BY position")
        }
    }

    /// Those of them that have no grant yet: they would ask the backplane before downloading.
    func runnableDownloadIdsWithoutGrant() throws -> [String] {
        try read { db in
            try String.fetchAll(db, sql: "SELECT asset_id FROM downloads WHERE NOT paused AND NOT failed AND grant_id IS NULL")
        }
    }

    /// Applies `change` to a queued asset and stores it; returns the stored value, or nil when
    /// the asset is not queued.
    @discardableResult
    func updateDownload(assetId: String, _ change: (inout QueuedDownload) -> Void) throws -> QueuedDownload? {
        try write { db in
            guard var download = try Self.fetchQueue(db, assetId: assetId).first else { return nil }
            change(&download)
            try Self.storeDownload(download, db)
            return download
        }
    }

    /// Applies `change` to every queued asset (pause all, clear every retry count, …), in one
    /// transaction.
    func updateAllDownloads(_ change: (inout QueuedDownload) -> Void) throws {
        try write { db in
            for var download in try Self.fetchQueue(db) {
                change(&download)
                try Self.storeDownload(download, db)
            }
        }
    }

    static func queuedDownload(_ db: Database, assetId: String) throws -> QueuedDownload? {
        try fetchQueue(db, assetId: assetId).first
    }

    /// Writes the fields of a queued asset that change while it is queued.
    static func storeDownload(_ download: QueuedDownload, _ db: Database) throws {
        try db.execute(
            sql: """
                UPDATE downloads SET paused = ?, failed = ?, error_count = ?, last_failure = ?, bytes_downloaded = ?,
                  expected_bytes = ?, expected_is_estimate = ?, grant_id = ?, denial = ?, estimated_bytes = ?, estimate_basis = ? WHERE asset_id = ?
                """,
            arguments: [
                download.paused, download.failed, download.errorCount, try download.lastFailure.map { try encoder.encode($0) },
                download.bytesDownloaded, download.expectedBytes, download.expectedIsEstimate, download.grantId,
                try download.denial.map { try encoder.encode($0) }, download.estimatedBytes, download.estimateBasis.rawValue, download.assetId,
            ])
    }

    /// A download completed: its record moves from the queue to the assets (and its subscription
    /// item, if any, becomes downloaded), in one transaction.
    /// Returns false, recording nothing, when the asset left the queue meanwhile (removed or
    /// wiped while its last file came in).
    func completeDownload(_ asset: LocalAsset, downloadedAt: Date) throws -> Bool {
        let request = try asset.request.map { try Self.encoder.encode($0) }
        return try write { db in
            let queued = try Row.fetchOne(
                db, sql: "SELECT grant_id, window, license, first_played_at FROM downloads WHERE asset_id = ?", arguments: [asset.assetId])
            let grantId: String? = try queued?.decode(String?.self, forColumn: "grant_id")
            try db.execute(sql: "DELETE FROM downloads WHERE asset_id = ?", arguments: [asset.assetId])
            guard db.changesCount > 0 else { return false }
            try Self.insertAsset(asset, request: request, db)
            // Its rights come along: the granted window, the license, when the window started,
            // and its first play if it was played while it downloaded.
            try db.execute(
                sql: "UPDATE assets SET window = ?, license = ?, downloaded_at = ?, first_played_at = ? WHERE asset_id = ?",
                arguments: [
                    try queued?.decode(Data?.self, forColumn: "window"), try queued?.decode(Data?.self, forColumn: "license"), downloadedAt,
                    try queued?.decode(Date?.self, forColumn: "first_played_at"), asset.assetId,
                ])
            // The grant moves with the asset; the backplane hears of the completion at the next sync.
            if let grantId {
                try db.execute(sql: "UPDATE assets SET grant_id = ? WHERE asset_id = ?", arguments: [grantId, asset.assetId])
                try Self.recordGrantReport(grantId, .completed, db)
            }
            // A subscription item of this asset is downloaded now, in the same commit.
            try db.execute(
                sql: "UPDATE subscription_items SET state = ? WHERE asset_id = ? AND state = ?",
                arguments: [SubscriptionItem.State.downloaded.rawValue, asset.assetId, SubscriptionItem.State.queued.rawValue])
            return true
        }
    }

    private static func renumber(_ order: [String], _ db: Database) throws {
        for (position, assetId) in order.enumerated() {
            try db.execute(sql: "UPDATE downloads SET position = ? WHERE asset_id = ?", arguments: [position, assetId])
        }
    }

    static func fetchQueue(_ db: Database, assetId: String? = nil) throws -> [QueuedDownload] {
        let rows = try assetId.map { try Row.fetchAll(db, sql: "SELECT * FROM downloads WHERE asset_id = ?", arguments: [$0]) }
            ?? Row.fetchAll(db, sql: "SELECT * FROM downloads ORDER BY position")
        return try rows.enumerated().map { index, row in
            // The stored position orders the queue and may have gaps; the public one is the place.
            let place = assetId == nil
                ? index
                : try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM downloads WHERE position < ?", arguments: [row.decode(Int.self, forColumn: "position")]) ?? 0
            return try QueuedDownload(
                request: try decoder.decode(DownloadRequest.self, from: row.decode(Data.self, forColumn: "request")),
                position: place, paused: row.decode(forColumn: "paused"), failed: row.decode(forColumn: "failed"), errorCount: row.decode(forColumn: "error_count"),
                lastFailure: try (try row.decode(Data?.self, forColumn: "last_failure")).map { try decoder.decode(DownloadFailure.self, from: $0) },
                bytesDownloaded: row.decode(forColumn: "bytes_downloaded"), expectedBytes: row.decode(forColumn: "expected_bytes"),
                expectedIsEstimate: row.decode(forColumn: "expected_is_estimate"), addedAt: row.decode(forColumn: "added_at"), grantId: row.decode(forColumn: "grant_id"),
                window: try (try row.decode(Data?.self, forColumn: "window")).map { try decoder.decode(DownloadWindow.self, from: $0) },
                license: try (try row.decode(Data?.self, forColumn: "license")).map { try decoder.decode(LicenseState.self, from: $0) },
                denial: try (try row.decode(Data?.self, forColumn: "denial")).map { try decoder.decode(DownloadDenial.self, from: $0) },
                firstPlayedAt: row.decode(forColumn: "first_played_at"),
                // Read back from the database, which is untrusted as any input: never below 0.
                estimatedBytes: (row.decode(Int64?.self, forColumn: "estimated_bytes")).map { max($0, 0) },
                estimateBasis: EstimateBasis(rawValue: row.decode(Int.self, forColumn: "estimate_basis")) ?? .bandwidth)
        }
    }
}

extension SDKDatabase {
    /// A completed asset found damaged goes back to the head of the queue, in one transaction:
    /// its record goes (its grant reported deleted; a new download asks again), and its
    /// subscription item, if any, is queued again.
    /// Returns false, changing nothing, when the asset's record is gone (deleted meanwhile).
    func requeueDamagedAsset(_ assetId: String, request: DownloadRequest) throws -> Bool {
        let data = try Self.encoder.encode(request)
        return try write { db in
            try Self.reportGrant(ofAsset: assetId, in: "assets", .deleted, db)
            try db.execute(sql: "DELETE FROM assets WHERE asset_id = ?", arguments: [assetId])
            guard db.changesCount > 0 else { return false }
            try Self.insertDownload(assetId, request: data, at: 0, db)
            try db.execute(
                sql: "UPDATE subscription_items SET state = ? WHERE asset_id = ? AND state = ?",
                arguments: [SubscriptionItem.State.queued.rawValue, assetId, SubscriptionItem.State.downloaded.rawValue])
            return true
        }
    }
}
