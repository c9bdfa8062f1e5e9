import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// Subscriptions and the download queue together: published episodes downloaded with no app
/// code, the feed's quota deleting the oldest, and items the app queued itself counted in a feed.
@Suite struct SubscriptionDownloadTests {
    @Test func aPublishedEpisodeIsDownloadedAndTheQuotaDeletesTheOldestFiles() async throws {
        let bench = try await DownloadBench.start()
        let server = bench.server
        _ = try await server.services.feeds.putFeed(applicationId: server.applicationId, feedId: "daily", FeedInput(title: "Daily"))
        func publish(_ id: String) async throws {
            bench.origin.serve("/daily/\(id).mp4", TestOrigin.content(30_000, seed: UInt8(id.count + Int(id.utf8.last!))))
            let episode = EpisodeInput(
                assetId: id, title: "Episode \(id)", downloadURL: bench.origin.url("/daily/\(id).mp4").absoluteString, mediaType: .file,
                permittedMimeTypes: ["video/mp4"])
            _ = try await server.services.feeds.publish(applicationId: server.applicationId, feedId: "daily", PublishEpisodesRequest(episodes: [episode]))
        }
        try await publish("d1")
        try await bench.engine.subscriptions.subscribe(feedId: "daily", maxItems: 2, autodeleteOldItems: true)
        let first = try await bench.waitForOutcome("d1")
        #expect(first.state == .completed)
        let firstFile = try #require(first.localURL)
        #expect(try Data(contentsOf: firstFile) == bench.origin.bytes(at: "/daily/d1.mp4"))
        try await bench.wait("the item to be marked downloaded") {
            try await bench.engine.subscriptions.items().first { $0.assetId == "d1" }?.state == .downloaded
        }

        try await publish("d2")
        try await bench.engine.sync()
        #expect(try await bench.waitForOutcome("d2").state == .completed)
        try await publish("d3")
        try await bench.engine.sync()
        #expect(try await bench.waitForOutcome("d3").state == .completed)
        // At the quota of two, d3 made room by deleting the oldest, d1, files and all.
        #expect(!FileManager.default.fileExists(atPath: firstFile.path))
        #expect(try await bench.engine.downloads.asset("d1") == nil)
        #expect(try await bench.engine.downloads.completed().map(\.assetId).sorted() == ["d2", "d3"])
        let states = Dictionary(uniqueKeysWithValues: try await bench.engine.subscriptions.items().map { ($0.assetId, $0.state) })
        #expect(states == ["d1": .reset, "d2": .downloaded, "d3": .downloaded])
        await bench.stop()
    }

    @Test func anAssetTheAppQueuedCountsTowardAFeedOnceIncluded() async throws {
        let bench = try await DownloadBench.start()
        let server = bench.server
        _ = try await server.services.feeds.putFeed(applicationId: server.applicationId, feedId: "daily", FeedInput(title: "Daily"))
        // The app's own download, included in the feed's tracking while it waits in the queue.
        try await bench.engine.downloads.setEnabled(false)
        bench.origin.serve("/own.mp4", TestOrigin.content(20_000, seed: 9))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "own", url: bench.origin.url("/own.mp4")))
        let included = try await bench.engine.subscriptions.includeItem(assetId: "own", inTrackingFeed: "daily")
        #expect(included.state == .queued && included.viaSubscription && included.feedId == "daily")
        #expect(included.metadata.downloadURL == bench.origin.url("/own.mp4").absoluteString)
        try await bench.engine.downloads.setEnabled(true)
        let own = try await bench.waitForOutcome("own")
        #expect(own.state == .completed)
        let ownFile = try #require(own.localURL)
        try await bench.wait("the included item to follow its download") {
            try await bench.engine.subscriptions.items(feedId: "daily").first?.state == .downloaded
        }

        // What cannot be tracked.
        for (assetId, feedId) in [("nothing", "daily"), ("own", "weekly"), ("own", "")] {
            do {
                try await bench.engine.subscriptions.includeItem(assetId: assetId, inTrackingFeed: feedId)
                Issue.record("\(assetId) in \(feedId) was tracked")
            } catch let error as BackplaneClientError {
                #expect(error.kind == .invalidInput, "\(assetId) in \(feedId): \(error)")
            }
        }

        // A quota of two: the app's asset and d1 fill it; d2 makes room by deleting the oldest,
        // the app's own, which without the inclusion would not count at all.
        func publish(_ id: String) async throws {
            bench.origin.serve("/daily/\(id).mp4", TestOrigin.content(10_000, seed: UInt8(id.utf8.last!)))
            let episode = EpisodeInput(
                assetId: id, title: "Episode \(id)", downloadURL: bench.origin.url("/daily/\(id).mp4").absoluteString, mediaType: .file)
            _ = try await server.services.feeds.publish(applicationId: server.applicationId, feedId: "daily", PublishEpisodesRequest(episodes: [episode]))
        }
        try await publish("d1")
        try await bench.engine.subscriptions.subscribe(feedId: "daily", maxItems: 2, autodeleteOldItems: true)
        #expect(try await bench.waitForOutcome("d1").state == .completed)
        #expect(FileManager.default.fileExists(atPath: ownFile.path))
        try await publish("d2")
        try await bench.engine.sync()
        #expect(try await bench.waitForOutcome("d2").state == .completed)
        #expect(!FileManager.default.fileExists(atPath: ownFile.path))
        #expect(try await bench.engine.downloads.completed().map(\.assetId).sorted() == ["d1", "d2"])
        let states = Dictionary(uniqueKeysWithValues: try await bench.engine.subscriptions.items().map { ($0.assetId, $0.state) })
        #expect(states == ["own": .reset, "d1": .downloaded, "d2": .downloaded])

        // The app downloads its asset again: included once more, its reset item counts again.
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "own", url: bench.origin.url("/own.mp4")))
        let again = try await bench.engine.subscriptions.includeItem(assetId: "own", inTrackingFeed: "daily")
        #expect([.queued, .downloaded].contains(again.state), "\(again.state)")
        #expect(try await bench.waitForOutcome("own").state == .completed)
        try await bench.wait("the included item to follow its download again") {
            try await bench.engine.subscriptions.items(feedId: "daily").first { $0.assetId == "own" }?.state == .downloaded
        }
        await bench.stop()
    }
}
