import ClientSDK
import Foundation
import GRDB
import Testing
import TestSupport

/// Where an asset's files live: one directory per id, always, and the SDK's files readable by
/// the app's user alone.
@Suite(.serialized) struct AssetDirectoryTests {
    /// Two ids of 120 bytes that share their first 100, as URLs used as ids do.
    static let longIds = (
        String(repeating: "https://cdn.example.com/catalogue/", count: 3).prefix(100) + "season-1/episode-01.mp4",
        String(repeating: "https://cdn.example.com/catalogue/", count: 3).prefix(100) + "season-1/episode-02.mp4")

    @Test func idsSharingALongPrefixGetTheirOwnFiles() async throws {
        let bench = try await DownloadBench.start()
        let (first, second) = (String(Self.longIds.0), String(Self.longIds.1))
        let one = TestOrigin.content(100_000, seed: 1)
        let two = TestOrigin.content(100_000, seed: 2)
        bench.origin.serve("/one.mp4", one)
        bench.origin.serve("/two.mp4", two)
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: first, url: bench.origin.url("/one.mp4")))
        #expect(try await bench.waitForOutcome(first).state == .completed)
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: second, url: bench.origin.url("/two.mp4")))
        let secondAsset = try await bench.waitForOutcome(second)
        // Before, the second "completed" with the first's bytes without asking the origin.
        #expect(bench.origin.requests("/two.mp4") == 1)
        #expect(try Data(contentsOf: try #require(secondAsset.localURL)) == two)
        try await bench.engine.downloads.remove(assetId: second)
        let firstAsset = try #require(try await bench.engine.downloads.asset(first))
        #expect(try Data(contentsOf: try #require(firstAsset.localURL)) == one)
        await bench.stop()
    }

    @Test func filesUnderTheFirstNamingRuleMoveToTheirOwnDirectory() async throws {
        let dataDirectory = temporaryDirectory("sdk-directory-names")
        let server = try await InProcessBackplane.start()
        let origin = try await TestOrigin.start()
        let id = String(Self.longIds.0)
        let movie = TestOrigin.content(80_000, seed: 4)
        origin.serve("/movie.mp4", movie)
        var bench = try await DownloadBench.start(dataDirectory: dataDirectory, server: server, origin: origin)
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: id, url: origin.url("/movie.mp4")))
        let downloaded = try #require(try await bench.waitForOutcome(id).localURL)
        await bench.engine.shutdown()

        // As the first rule left it: the hex of the id's first 100 bytes, recorded so.
        let content = dataDirectory.appendingPathComponent("content")
        let current = downloaded.deletingLastPathComponent().lastPathComponent
        let truncated = Array(id.utf8.prefix(100)).map { String(format: "%02x", $0) }.joined()
        try FileManager.default.moveItem(at: content.appendingPathComponent(current), to: content.appendingPathComponent(truncated))
        let database = try DatabaseQueue(path: dataDirectory.appendingPathComponent("backplane-sdk.sqlite").path)
        try await database.write { db in
            try db.execute(sql: "UPDATE assets SET relative_path = ? WHERE asset_id = ?", arguments: ["\(truncated)/movie.mp4", id])
        }
        try await database.close()

        bench = try await DownloadBench.start(dataDirectory: dataDirectory, server: server, origin: origin)
        let moved = try #require(try await bench.engine.downloads.asset(id))
        #expect(moved.localURL?.deletingLastPathComponent().lastPathComponent == current)
        #expect(try Data(contentsOf: try #require(moved.localURL)) == movie)
        #expect(!FileManager.default.fileExists(atPath: content.appendingPathComponent(truncated).path))
        // Checked after the move (another id may have written there) and found whole: not fetched again.
        try await bench.wait("the check after the move") {
            let settled = try DatabaseQueue(path: dataDirectory.appendingPathComponent("backplane-sdk.sqlite").path)
            let record = try await settled.read { try String.fetchOne($0, sql: "SELECT CAST(json AS TEXT) FROM state WHERE name = 'unflushed-downloads'") }
            return !(record ?? "").contains("directory-names-moved")
        }
        #expect(origin.requests("/movie.mp4") == 1)
        await bench.stop()
    }

    @Test func theDataDirectoryAndDatabaseAreTheUsersAlone() async throws {
        let dataDirectory = temporaryDirectory("sdk-modes")
        // Made by the app with the usual umask's modes.
        try FileManager.default.createDirectory(at: dataDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let bench = try await DownloadBench.start(dataDirectory: dataDirectory)
        _ = try await bench.engine.sync()
        func mode(_ name: String) throws -> Int {
            let path = name.isEmpty ? dataDirectory.path : dataDirectory.appendingPathComponent(name).path
            return try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        }
        #expect(try mode("") == 0o700)
        for file in ["backplane-sdk.sqlite", "backplane-sdk.sqlite-wal", "backplane-sdk.sqlite-shm"] {
            #expect(try mode(file) == 0o600, "\(file)")
        }
        await bench.stop()
    }
}

/// The SDK database is input too: a row someone edited (or a disk returned wrong) is an error
/// of the call that reads it, never a crash of the app.
@Suite struct TamperedDatabaseTests {
    @Test func anEditedQueueRowIsAnErrorAndExtremeNumbersAreCarriedOn() async throws {
        let dataDirectory = temporaryDirectory("sdk-tampered")
        let server = try await InProcessBackplane.start()
        let origin = try await TestOrigin.start()
        origin.serve("/a.mp4", TestOrigin.content(10_000, seed: 1))
        var bench = try await DownloadBench.start(dataDirectory: dataDirectory, server: server, origin: origin)
        try await bench.engine.downloads.setEnabled(false)
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "a", url: origin.url("/a.mp4")))
        await bench.engine.shutdown()

        let path = dataDirectory.appendingPathComponent("backplane-sdk.sqlite").path
        func edit(_ sql: String) async throws {
            let database = try DatabaseQueue(path: path)
            try await database.write { try $0.execute(sql: sql) }
            try await database.close()
        }
        // Text where a count belongs: GRDB's subscripts stop the process on it.
        try await edit("UPDATE downloads SET error_count = 'many'")
        bench = try await DownloadBench.start(dataDirectory: dataDirectory, server: server, origin: origin)
        await #expect(throws: BackplaneClientError.self) { try await bench.engine.downloads.queue() }
        await bench.engine.shutdown()

        // Numbers at Int64.max: the next position and the next error count do not overflow.
        try await edit("UPDATE downloads SET error_count = 9223372036854775807, position = 9223372036854775807")
        bench = try await DownloadBench.start(dataDirectory: dataDirectory, server: server, origin: origin)
        origin.serve("/b.mp4", TestOrigin.content(10_000, seed: 2))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "b", url: origin.url("/b.mp4")))
        #expect(try await bench.engine.downloads.queue().map(\.assetId).sorted() == ["a", "b"])
        await bench.stop()
    }
}
