@testable import Backplane
import Foundation
import GRDB
import BackplaneWire
import Testing

/// The subscription change log is numbered per application: one tenant's CMS activity never
/// shows in another tenant's cursors, and cursors issued before the renumbering stay valid.
@Suite struct ChangeCursorTests {
    private func publish(_ services: BackplaneServices, _ applicationId: String, feed: String, _ assetIds: [String]) async throws {
        _ = try await services.feeds.publish(
            applicationId: applicationId, feedId: feed, PublishEpisodesRequest(episodes: assetIds.map { EpisodeInput(assetId: $0) }))
    }

    private static func decoded(_ cursor: String) -> String? {
        OpaqueCursor.decode(cursor)
    }

    @Test func anotherApplicationsChangesDoNotMoveACursor() async throws {
        let fixture = try await Fixture.make()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        let services = fixture.services
        let (other, _) = try await services.applications.createApplication(name: "another tenant")
        for applicationId in [fixture.applicationId, other.id] {
            _ = try await services.feeds.putFeed(applicationId: applicationId, feedId: "news", FeedInput(title: "News"))
        }
        _ = try await services.subscriptions.subscribe(applicationId: fixture.applicationId, deviceId: "phone", feedId: "news", SubscribeRequest())
        let quiet = try await services.subscriptions.changes(applicationId: fixture.applicationId, deviceId: "phone", cursor: nil, limit: nil)

        // The other tenant publishes a lot.
        for batch in 0..<5 { try await publish(services, other.id, feed: "news", (0..<20).map { "other-\(batch)-\($0)" }) }
        let afterOthers = try await services.subscriptions.changes(
            applicationId: fixture.applicationId, deviceId: "phone", cursor: quiet.cursor, limit: nil)
        #expect(afterOthers.changes.isEmpty)
        #expect(afterOthers.cursor == quiet.cursor)

        // Its own first change is number 1, whatever the other tenant did.
        try await publish(services, fixture.applicationId, feed: "news", ["mine"])
        let mine = try await services.subscriptions.changes(
            applicationId: fixture.applicationId, deviceId: "phone", cursor: afterOthers.cursor, limit: nil)
        #expect(mine.changes.map(\.assetId) == ["mine"])
        #expect(Self.decoded(mine.cursor) == "c2:1")
        // And the other tenant's numbering is its own too.
        _ = try await services.subscriptions.subscribe(applicationId: other.id, deviceId: "tablet", feedId: "news", SubscribeRequest())
        try await publish(services, other.id, feed: "news", ["theirs"])
        let theirs = try await services.subscriptions.changes(applicationId: other.id, deviceId: "tablet", cursor: nil, limit: nil)
        #expect(theirs.changes.map(\.assetId) == ["theirs"])
        #expect(Self.decoded(theirs.cursor) == "c2:101")
    }

    /// A database as version 5 left it: one change log numbered across applications A and B,
    /// and devices holding cursors into it. After migration every device reads exactly the
    /// changes it had not read yet.
    @Test func cursorsIssuedBeforeTheMigrationStayValid() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("change-cursor-migration-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("backplane.sqlite").path
        do {
            let queue = try DatabaseQueue(path: path)
            try SQLiteStore.migrator.migrate(queue, upTo: "v5: device keys")
            try await queue.write { db in
                for application in ["A", "B"] {
                    try db.execute(
                        sql: "INSERT INTO applications (id, name, settings, created_at) VALUES (?, ?, '{}', ?)", arguments: [application, application, Date()])
                    try db.execute(
                        sql: "INSERT INTO feeds (application_id, feed_id, title, created_at, updated_at) VALUES (?, 'news', 'News', ?, ?)",
                        arguments: [application, Date(), Date()])
                }
                // Global numbers 1…8: A, B, A, B, B, A, B, A.
                let owners = ["A", "B", "A", "B", "B", "A", "B", "A"]
                for (index, owner) in owners.enumerated() {
                    try db.execute(
                        sql: "INSERT INTO episode_changes (seq, application_id, feed_id, asset_id, kind, snapshot) VALUES (?, ?, 'news', ?, 'retracted', NULL)",
                        arguments: [index + 1, owner, "\(owner)\(index + 1)"])
                }
                // A's phone subscribed when the log stood at 2, B's tablet at 4, A's watch at 6.
                for (application, device, since) in [("A", "phone", 2), ("B", "tablet", 4), ("A", "watch", 6)] {
                    try db.execute(
                        sql: "INSERT INTO subscriptions (application_id, device_id, feed_id, since_seq, subscribed_at, updated_at) VALUES (?, ?, 'news', ?, ?, ?)",
                        arguments: [application, device, since, Date(), Date()])
                }
            }
            try queue.close()
        }

        let store = try SQLiteStore(path: path)
        let subscriptions = SubscriptionService(store: store)
        func legacy(_ seq: Int) -> String { Base64URL.encode(Data("c1:\(seq)".utf8)) }
        func read(_ application: String, _ device: String, _ cursor: String?) async throws -> [String] {
            try await subscriptions.changes(applicationId: application, deviceId: device, cursor: cursor, limit: nil).changes.map(\.assetId)
        }

        // A fresh read follows each subscription's converted starting point.
        #expect(try await read("A", "phone", nil) == ["A3", "A6", "A8"])
        #expect(try await read("B", "tablet", nil) == ["B5", "B7"])
        #expect(try await read("A", "watch", nil) == ["A8"])
        // Cursors from before: the phone had read up to global 3 (its A3), then to 5 (B's change, skipped).
        #expect(try await read("A", "phone", legacy(3)) == ["A6", "A8"])
        #expect(try await read("A", "phone", legacy(5)) == ["A6", "A8"])
        #expect(try await read("A", "phone", legacy(8)) == [])
        #expect(try await read("B", "tablet", legacy(5)) == ["B7"])

        // New changes continue each application's numbering where its migrated log ended.
        let services = BackplaneServices(store: store)
        try await publish(services, "A", feed: "news", ["A-new"])
        let page = try await subscriptions.changes(applicationId: "A", deviceId: "phone", cursor: legacy(8), limit: nil)
        #expect(page.changes.map(\.assetId) == ["A-new"])
        #expect(Self.decoded(page.cursor) == "c2:5")
        #expect(try await read("A", "phone", page.cursor) == [])
    }
}
