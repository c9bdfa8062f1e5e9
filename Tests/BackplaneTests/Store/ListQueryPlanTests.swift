@testable import Backplane
import Foundation
import Synchronization
import GRDB
import BackplaneWire
import Testing
import TestSupport

/// Every list page the admin and reporting routes serve must cost the same whatever the size of
/// the fleet: SQLite must read it from an index, in the page's order, from the cursor on. The
/// store's own statements are captured while it serves each filter over 100,000 rows per table,
/// and SQLite's plan for each must use an index and never sort in a temporary B-tree.
@Suite struct ListQueryPlanTests {
    private static let rows = 100_000
    private static let at = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func everyListFilterReadsAnIndexInPageOrder() async throws {
        let statements = Mutex<[String]>([])
        let directory = temporaryDirectory("list-plans")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(path: directory.appendingPathComponent("backplane.sqlite").path) { sql in
            statements.withLock { $0.append(sql) }
        }
        let applications = ApplicationService(store: store, wakeUps: WakeUpHub())
        let (application, _) = try await applications.createApplication(name: "plans")
        let app = application.id
        try await Self.fill(store, applicationId: app)
        statements.withLock { $0.removeAll() }

        // Each call is one page the routes serve; the name says which.
        let pages: [Page] = Self.devicePages(store, app) + Self.commandPages(store, app) + Self.grantPages(store, app) + Self.eventPages(store, app) + Self.episodePages(store, app)
        for page in pages {
            statements.withLock { $0.removeAll() }
            let count = try await page.run()
            // GRDB's own look at the schema aside, every SELECT is the store's.
            let selects = statements.withLock { $0 }.filter { $0.uppercased().hasPrefix("SELECT") && !$0.contains("sqlite_master") }
            #expect(!selects.isEmpty, "\(page.name): no statement captured")
            #expect(count > 0 || page.name.hasPrefix("episodes"), "\(page.name): the page is empty, so the filter was never exercised")
            var plans: [String] = []
            for sql in selects {
                let plan = try await store.read { db in
                    try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN \(sql)").map { row -> String in row["detail"] }
                }
                let problems = plan.filter { $0.contains("TEMP B-TREE") || Self.isTableScan($0) }
                #expect(problems.isEmpty, "\(page.name): \(sql)\nplan: \(plan)")
                plans += plan
            }
            // The filter narrows an index search itself: an index in the right order with the
            // filter checked row by row would read the whole fleet to find a rare value. (A page
            // of one statement, but for the sync, which reads its device first.)
            for term in page.searched {
                #expect(plans.contains { Self.searches($0, term) }, "\(page.name): \(term) is not searched\nplans: \(plans)")
            }
        }
    }

    struct Page {
        var name: String
        /// The index constraints the plan must show, e.g. "user_id=?".
        var searched: [String]
        var run: () async throws -> Int
    }

    private static func devicePages(_ store: SQLiteStore, _ app: String) -> [Page] {
        let filters: [(String, DeviceFilter, Int64?, [String])] = [
            ("devices", DeviceFilter(), nil, ["application_id=?"]),
            ("devices after a cursor", DeviceFilter(), 50_000, ["application_id=?", "rowid>?"]),
            ("devices with unregistered", DeviceFilter(includeUnregistered: true), 50_000, ["application_id=?", "rowid>?"]),
            ("devices of a user", DeviceFilter(userId: "u7"), 1, ["user_id=?"]),
            ("devices by external id", DeviceFilter(externalDeviceId: "x7"), 1, ["external_device_id=?"]),
            ("devices by nickname", DeviceFilter(nickname: "n7", includeUnregistered: true), nil, ["nickname=?"]),
        ]
        let lists = filters.map { name, filter, after, searched in
            Page(name: name, searched: searched) { try await store.devices(applicationId: app, filter: filter, afterRowId: after, limit: 100).count }
        }
        return lists + [
            Page(name: "a user's own devices", searched: ["user_id=?"]) { try await store.devices(applicationId: app, userId: "u7").count },
            Page(name: "a device's commands", searched: ["device_id=?"]) { try await store.commands(applicationId: app, deviceId: "d7").count },
            // Not a list page, but every sync runs it: the open states are searched, not the
            // device's whole history.
            Page(name: "a sync's open commands", searched: ["state=?"]) {
                // Read in the store's write, where statements are traced (a quiet sync reads the same
                // statement on a point reader).
                let plan = SyncPlan(applicationId: app, deviceId: "d7", signedIn: nil, reportedGrantIds: [], ackedCommandIds: []) { read in
                    var decision = SyncDecision(deviceAfter: read.device, releasedAt: at)
                    decision.openCommands = read.openCommands
                    return decision
                }
                return try await store.sync(plan, spending: nil).openCommands.count
            },
        ]
    }

    /// The application's command list (`GET /v1/admin/commands`, the console), newest first.
    private static func commandPages(_ store: SQLiteStore, _ app: String) -> [Page] {
        let filters: [(String, CommandFilter, [String])] = [
            ("commands", CommandFilter(), ["application_id=?", "row_id<?"]),
            ("commands in a state", CommandFilter(state: .pending), ["state=?", "row_id<?"]),
            ("commands of a type", CommandFilter(type: .syncNow), ["type=?", "row_id<?"]),
            ("commands in a state of a type", CommandFilter(state: .pending, type: .syncNow), ["state=?", "type=?"]),
            ("commands of a device, newest first", CommandFilter(deviceId: "d7"), ["device_id=?"]),
        ]
        return filters.map { name, filter, searched in
            Page(name: name, searched: searched) {
                try await store.commands(applicationId: app, filter: filter, beforeRowId: 99_000, limit: 100).count
            }
        }
    }

    private static func grantPages(_ store: SQLiteStore, _ app: String) -> [Page] {
        let filters: [(String, String?, String?, String)] = [
            ("grants", nil, nil, "application_id=?"), ("grants of a user", "u7", nil, "user_id=?"), ("grants of a device", nil, "d7", "device_id=?"),
        ]
        return filters.map { name, user, device, searched in
            Page(name: name, searched: [searched, "rowid<?"]) {
                try await store.downloadGrants(applicationId: app, userId: user, deviceId: device, beforeRowId: 50_000, limit: 100).count
            }
        }
    }

    /// The device's list of episodes updated since a date. No episodes are stored: the plan is
    /// what is checked, an empty page is fine. Read in update order from the date; a feed filter
    /// is checked row by row, so its cost follows the episodes updated since then.
    private static func episodePages(_ store: SQLiteStore, _ app: String) -> [Page] {
        let after = EpisodeKey(updatedAt: at, feedId: "f1", assetId: "a1")
        let filters: [(String, [String]?, EpisodeKey?)] = [("episodes", nil, nil), ("episodes of feeds", ["f1", "f2"], after)]
        return filters.map { name, feeds, after in
            Page(name: name, searched: ["updated_at>"]) {
                try await store.episodes(applicationId: app, updatedSince: at, feedIds: feeds, after: after, limit: 100).count
            }
        }
    }

    private static func eventPages(_ store: SQLiteStore, _ app: String) -> [Page] {
        let cursor = EventKey(correctedTime: at.addingTimeInterval(10), rowId: 10)
        let filters: [(String, EventFilter, EventKey?, String)] = [
            ("events", EventFilter(), nil, "application_id=?"),
            ("events after a cursor", EventFilter(), cursor, "corrected_time>"),
            ("events in a time range", EventFilter(from: at, to: at.addingTimeInterval(100_000)), nil, "corrected_time<?"),
            ("events of a type", EventFilter(type: .playStart), nil, "type=?"),
            ("events of a type after a cursor", EventFilter(type: .playStart), cursor, "type=?"),
            ("events of a user", EventFilter(userId: "u7"), nil, "user_id=?"),
            ("events of a device", EventFilter(deviceId: "d7"), cursor, "device_id=?"),
            ("events of an asset", EventFilter(assetId: "a7"), nil, "asset_id=?"),
            // The rarer value is searched: a user's events of a type, not the type's events.
            ("events of a user and a type", EventFilter(type: .playStart, userId: "u7"), nil, "user_id=?"),
            ("events of a device and a type", EventFilter(type: .playStart, deviceId: "d3"), cursor, "device_id=?"),
        ]
        return filters.map { name, filter, after, searched in
            Page(name: name, searched: [searched]) { try await store.events(applicationId: app, filter: filter, after: after, limit: 100).count }
        }
    }

    /// Whether an index search's constraints include `term` ("device_id=?" is not found in
    /// "external_device_id=?").
    private static func searches(_ detail: String, _ term: String) -> Bool {
        detail.contains(" USING ") && (detail.contains("(" + term) || detail.contains(" " + term))
    }

    /// `SCAN devices` reads the whole table; `SCAN devices USING INDEX …` reads an index in order.
    private static func isTableScan(_ detail: String) -> Bool {
        detail.hasPrefix("SCAN ") && !detail.contains(" USING ")
    }

    /// 100,000 devices (every tenth unregistered), events, grants and commands, spread over
    /// 1,000 users, 1,000 devices and 100 assets, written in one transaction.
    private static func fill(_ store: SQLiteStore, applicationId: String) async throws {
        let time = "'2027-01-15 08:00:00.000'"
        let millis = Int64(at.timeIntervalSince1970 * 1000)
        let window = #"{"expiryAfterDownloadSeconds":-1,"expiryAfterPlaySeconds":-1,"offlineViewingPeriodSeconds":-1}"#
        try await store.write { db in
            try db.execute(sql: """
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(rows))
                INSERT INTO devices (application_id, device_id, user_id, external_device_id, nickname, platform, download_enabled,
                    credential_hash, registered_at, updated_at, last_seen_at, unregistered_at)
                SELECT ?, 'd' || i, 'u' || (i % 1000), 'x' || (i % 1000), 'n' || (i % 1000), 'linux', i % 2, 'hash', \(time), \(time), \(time),
                    CASE WHEN i % 10 = 0 THEN \(time) END FROM n;
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(rows))
                INSERT INTO events (application_id, device_id, sequence, event_id, type, device_time, received_at, corrected_time,
                    user_id, asset_id)
                SELECT ?, 'd' || (i % 1000), i, 'e' || i, CASE i % 3 WHEN 0 THEN 'playStart' WHEN 1 THEN 'downloadStart' ELSE 'custom' END,
                    \(millis) + i, \(millis) + i, \(millis) + i, 'u' || (i % 1000), 'a' || (i % 100) FROM n;
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(rows))
                INSERT INTO download_grants (grant_id, application_id, user_id, device_id, asset_id, state, counts_for_lifetime,
                    window, granted_at, updated_at)
                SELECT 'g' || i, ?, 'u' || (i % 1000), 'd' || (i % 1000), 'a' || (i % 100), CASE WHEN i % 4 = 0 THEN 'active' ELSE 'deleted' END,
                    1, '\(window)', \(time), \(time) FROM n;
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(rows))
                INSERT INTO commands (command_id, application_id, device_id, type, state, created_at, updated_at, deferrals)
                SELECT 'c' || i, ?, 'd' || (i % 1000), CASE WHEN i % 5 = 0 THEN 'syncNow' ELSE 'wipe' END, CASE WHEN i % 7 = 0 THEN 'pending' ELSE 'succeeded' END,
                    \(time), \(time), 0 FROM n;
                """, arguments: [applicationId, applicationId, applicationId, applicationId])
        }
    }
}
