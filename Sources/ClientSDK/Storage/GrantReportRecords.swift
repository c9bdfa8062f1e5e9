import Foundation
import GRDB
import BackplaneWire

/// What became of the backplane's download grants, kept in the SDK database until a sync's
/// answer settles each report: recorded in the transaction that completes, fails or deletes the
/// download, so a kill at any point neither loses nor repeats one.
extension SDKDatabase {
    /// Records the grant of a queued download, once the backplane gave it; false when the
    /// download left the queue while the backplane answered (the grant is then reported deleted
    /// at once, so that it does not hold a place).
    ///
    /// The backplane gives back a grant the device still holds as far as it knows. When an
    /// unsent report ends that grant (the asset was deleted, or failed for good and its retries
    /// were cleared, and queued again before the next sync), the backplane never learns of that
    /// end: the report is dropped and the grant goes on with the new download, which the
    /// backplane's counts already hold.
    func recordGrant(_ grantId: String, window: DownloadWindow, forDownload assetId: String) throws -> Bool {
        let window = try Self.encoder.encode(window)
        return try write { db in
            try db.execute(
                sql: "UPDATE downloads SET grant_id = ?, window = ?, denial = NULL WHERE asset_id = ?", arguments: [grantId, window, assetId])
            guard db.changesCount > 0 else {
                try Self.recordGrantReport(grantId, .deleted, db)
                return false
            }
            try db.execute(sql: "DELETE FROM grant_reports WHERE grant_id = ?", arguments: [grantId])
            return true
        }
    }

    /// A grant asked for at queue time: the queued download takes it unless it has one; a grant
    /// the device holds already (the completed asset's) is left alone; any other grant the SDK
    /// cannot keep is reported deleted at once, so that it frees its place.
    func adoptGrant(_ grantId: String, window: DownloadWindow, assetId: String) throws {
        let window = try Self.encoder.encode(window)
        try write { db in
            if let row = try Row.fetchOne(db, sql: "SELECT grant_id FROM downloads WHERE asset_id = ?", arguments: [assetId]) {
                let held: String? = try row.decode(forColumn: "grant_id")
                if held == nil {
                    try db.execute(
                        sql: "UPDATE downloads SET grant_id = ?, window = ?, denial = NULL WHERE asset_id = ?",
                        arguments: [grantId, window, assetId])
                } else if held != grantId {
                    try Self.recordGrantReport(grantId, .deleted, db)
                }
                return
            }
            let completed = try String.fetchOne(db, sql: "SELECT grant_id FROM assets WHERE asset_id = ?", arguments: [assetId])
            if completed != grantId { try Self.recordGrantReport(grantId, .deleted, db) }
        }
    }

    /// A new registration: the backplane released the grants of the old one (an unregister, a
    /// move to another user), so queued downloads ask again (a grant still held is answered again).
    func forgetQueuedGrants() throws {
        try write { db in
            try db.execute(sql: "UPDATE downloads SET grant_id = NULL, window = NULL WHERE grant_id IS NOT NULL")
        }
    }

    /// Stores a failed pass of a queued download; when it fails for good (`failed`), its grant
    /// ends as failed and a new one is asked for if the app clears the retries. Nil when the
    /// asset is not queued.
    func recordFailure(assetId: String, _ change: (inout QueuedDownload) -> Void) throws -> QueuedDownload? {
        try write { db in
            guard var download = try Self.queuedDownload(db, assetId: assetId) else { return nil }
            change(&download)
            if download.failed, let grantId = download.grantId {
                try Self.recordGrantReport(grantId, .failed, db)
                download.grantId = nil
            }
            try Self.storeDownload(download, db)
            return download
        }
    }

    /// The reports not yet settled, oldest first.
    func pendingGrantReports(limit: Int) throws -> [DownloadReport] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT grant_id, outcome FROM grant_reports ORDER BY recorded_at, grant_id LIMIT ?", arguments: [limit])
                .compactMap { row in
                    try DownloadReport.Outcome.known(row.decode(forColumn: "outcome")).map { try DownloadReport(grantId: row.decode(forColumn: "grant_id"), outcome: $0) }
                }
        }
    }

    /// Forgets the reports a sync's answer settled (accepted, duplicate or rejected alike: none
    /// would be answered otherwise if sent again): only those that were `sent`, with the outcome
    /// sent, so that an outcome recorded while the sync was out (deleted after completed) goes
    /// up next time, and an answer naming a report never sent settles nothing.
    func settleGrantReports(_ results: [DownloadReportResult], sent: [DownloadReport]) throws {
        let answered = Set(results.map(\.grantId))
        let settled = sent.filter { answered.contains($0.grantId) }
        guard !settled.isEmpty else { return }
        try write { db in
            for report in settled {
                try db.execute(
                    sql: "DELETE FROM grant_reports WHERE grant_id = ? AND outcome = ?", arguments: [report.grantId, report.outcome.rawValue])
            }
        }
    }

    /// Queues a report of the grant held by `assetId`'s row in `table` (`downloads` or `assets`), if any.
    static func reportGrant(ofAsset assetId: String, in table: String, _ outcome: DownloadReport.Outcome, _ db: Database) throws {
        precondition(table == "downloads" || table == "assets")
        if let grantId = try String.fetchOne(db, sql: "SELECT grant_id FROM \(table) WHERE asset_id = ?", arguments: [assetId]) {
            try recordGrantReport(grantId, outcome, db)
        }
    }

    /// A later outcome replaces an earlier one not yet sent (completed, then deleted: deleted).
    static func recordGrantReport(_ grantId: String, _ outcome: DownloadReport.Outcome, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO grant_reports (grant_id, outcome, recorded_at) VALUES (?, ?, ?)
                ON CONFLICT(grant_id) DO UPDATE SET outcome = excluded.outcome
                """,
            arguments: [grantId, outcome.rawValue, Date()])
    }
}
