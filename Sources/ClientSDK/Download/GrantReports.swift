import Foundation
import GRDB
import BackplaneWire

/// What became of the backplane's download grants, kept in the SDK database until a sync's
/// answer settles each report: recorded in the transaction that completes, fails or deletes the
/// download, so a kill at any point neither loses nor repeats one.
extension LocalStore {
    /// Records the grant of a queued download, once the backplane gave it.
    func recordGrant(_ grantId: String, forDownload assetId: String) throws {
        try queue.write { db in
            try db.execute(sql: "UPDATE downloads SET grant_id = ? WHERE asset_id = ?", arguments: [grantId, assetId])
        }
    }

    /// Stores a failed pass of a queued download; when it fails for good (`failed`), its grant
    /// ends as failed and a new one is asked for if the app clears the retries. Nil when the
    /// asset is not queued.
    func recordFailure(assetId: String, _ change: (inout QueuedDownload) -> Void) throws -> QueuedDownload? {
        try queue.write { db in
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
        try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT grant_id, outcome FROM grant_reports ORDER BY recorded_at, grant_id LIMIT ?", arguments: [limit])
                .compactMap { row in
                    DownloadReport.Outcome(rawValue: row["outcome"]).map { DownloadReport(grantId: row["grant_id"], outcome: $0) }
                }
        }
    }

    /// Forgets the reports a sync's answer settled (accepted, duplicate or rejected alike: none
    /// would be answered otherwise if sent again).
    func settleGrantReports(_ results: [DownloadReportResult]) throws {
        guard !results.isEmpty else { return }
        try queue.write { db in
            for result in results {
                try db.execute(sql: "DELETE FROM grant_reports WHERE grant_id = ?", arguments: [result.grantId])
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
