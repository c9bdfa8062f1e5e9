import Backplane
import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// Looks metadata up by asset id, as an app's data source would from its own CMS.
struct CatalogueDataSource: SubscriptionDataSource {
    func metadata(for episode: Episode) async throws -> EpisodeInput? {
        EpisodeInput(
            assetId: episode.episode.assetId, title: "From the app: \(episode.episode.assetId)",
            downloadURL: "\(unreachableOrigin)/app/\(episode.episode.assetId).mp4", mediaType: .file)
    }
}

@Suite struct SubscriptionTests {
    private func full(_ id: String) -> EpisodeInput {
        EpisodeInput(assetId: id, title: "Episode \(id)", downloadURL: "\(unreachableOrigin)/\(id).mp4", mediaType: .file)
    }

    private func publish(_ server: InProcessBackplane, feed: String, _ episodes: [EpisodeInput]) async throws {
        _ = try await server.services.feeds.publish(applicationId: server.applicationId, feedId: feed, PublishEpisodesRequest(episodes: episodes))
    }

    private func makeFeed(_ server: InProcessBackplane, _ feed: String) async throws {
        _ = try await server.services.feeds.putFeed(applicationId: server.applicationId, feedId: feed, FeedInput(title: feed))
    }

    private func start(_ server: InProcessBackplane, user: String, configure: (inout BackplaneClientConfiguration) -> Void = { _ in }) async throws -> (BackplaneEngine, EventRecorder) {
        var configuration = server.configuration(user: user, dataDirectory: temporaryDirectory("sdk-subs"))
        configure(&configuration)
        let engine = BackplaneEngine(configuration: configuration)
        let events = EventRecorder(engine.events())
        try await engine.start()
        return (engine, events)
    }

    @Test func fullMetadataEpisodesAreQueuedAtSubscribeAndOnLaterSyncs() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        try await makeFeed(server, "show")
        try await publish(server, feed: "show", [full("e1"), full("e2")])
        let (engine, events) = try await start(server, user: "ann")

        try await engine.subscriptions.subscribe(feedId: "show")
        #expect(Set(try await engine.subscriptions.items().map(\.assetId)) == ["e1", "e2"])
        #expect(try await engine.subscriptions.list().map(\.feedId) == ["show"])

        try await publish(server, feed: "show", [full("e3")])
        try await engine.sync()
        let items = try await engine.subscriptions.items(feedId: "show")
        #expect(items.map(\.assetId).sorted() == ["e1", "e2", "e3"])
        #expect(items.allSatisfy { $0.state == .queued && $0.viaSubscription })
        try await events.wait(for: "assetAdded") { if case .assetAdded(let item) = $0 { item.assetId == "e3" } else { false } }
        try await events.wait(for: "subscriptionSyncFinished")

        // A retraction removes an item not downloaded yet.
        _ = try await server.services.feeds.retractEpisode(applicationId: server.applicationId, feedId: "show", assetId: "e1")
        try await engine.sync()
        #expect(try await engine.subscriptions.items().map(\.assetId).sorted() == ["e2", "e3"])
        await engine.shutdown()  // uploads what is still queued

        // The event log has what the subscription manager did.
        let logged = try await server.storedEvents()
        let queued = logged.filter { $0.event.content.type == .queuedForDownload }.compactMap(\.event.content.assetId)
        #expect(queued.sorted() == ["e1", "e2", "e3"])
        #expect(logged.filter { $0.event.content.type == .removedFromQueue }.compactMap(\.event.content.assetId) == ["e1"])
    }

    @Test func assetIdOnlyEpisodesAreCompletedByACustomDataSource() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        try await makeFeed(server, "ids")
        try await publish(server, feed: "ids", [EpisodeInput(assetId: "a1"), EpisodeInput(assetId: "a2")])

        // Without a data source, asset-id-only episodes cannot be downloaded and are skipped.
        let (plain, _) = try await start(server, user: "bob")
        try await plain.subscriptions.subscribe(feedId: "ids")
        #expect(try await plain.subscriptions.items().isEmpty)
        await plain.shutdown()

        let (engine, _) = try await start(server, user: "cat") { $0.subscriptions.dataSource = CatalogueDataSource() }
        try await engine.subscriptions.subscribe(feedId: "ids")
        let items = try await engine.subscriptions.items()
        #expect(items.map(\.assetId).sorted() == ["a1", "a2"])
        #expect(items.allSatisfy { $0.metadata.downloadURL?.hasPrefix("\(unreachableOrigin)/app/") == true })
        await engine.shutdown()
    }

    @Test func atTheQuotaAutodeleteResetsTheOldest() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        try await makeFeed(server, "daily")
        let (engine, events) = try await start(server, user: "dan")
        try await engine.subscriptions.subscribe(feedId: "daily", maxItems: 2, autodeleteOldItems: true)
        for id in ["d1", "d2", "d3"] {
            try await publish(server, feed: "daily", [full(id)])
            try await engine.sync()
        }
        let items = try await engine.subscriptions.items(feedId: "daily")
        #expect(items.first { $0.assetId == "d1" }?.state == .reset)
        #expect(items.filter { $0.state == .queued }.map(\.assetId) == ["d2", "d3"])
        try await events.wait(for: "subscriptionAssetDeleted") {
            if case .subscriptionAssetDeleted("d1", "daily", .internal) = $0 { true } else { false }
        }
        await engine.shutdown()
    }

    @Test func theInitialEpisodesKeepPublicationOrderForAutodelete() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        try await makeFeed(server, "serial")
        for id in ["s1", "s2", "s3"] { try await publish(server, feed: "serial", [full(id)]) }
        let (engine, _) = try await start(server, user: "gil")
        try await engine.subscriptions.subscribe(feedId: "serial", maxItems: 2, autodeleteOldItems: true)
        #expect(try await engine.subscriptions.items().map(\.assetId) == ["s2", "s3"])
        try await publish(server, feed: "serial", [full("s4")])
        try await engine.sync()
        let items = try await engine.subscriptions.items()
        #expect(items.first { $0.assetId == "s2" }?.state == .reset)
        #expect(items.filter { $0.state == .queued }.map(\.assetId).sorted() == ["s3", "s4"])
        await engine.shutdown()
    }

    @Test func atTheQuotaWithoutAutodeleteNewItemsAreDeferred() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        try await makeFeed(server, "weekly")
        let (engine, events) = try await start(server, user: "eve") { $0.subscriptions.maxItemsPerFeed = 2; $0.subscriptions.autodeleteOldItems = false }
        try await engine.subscriptions.subscribe(feedId: "weekly")
        try await publish(server, feed: "weekly", [full("w1"), full("w2"), full("w3")])
        try await engine.sync()
        let items = try await engine.subscriptions.items(feedId: "weekly")
        #expect(items.filter { $0.state == .queued }.count == 2)
        #expect(items.filter { $0.state == .deferred }.map(\.assetId) == ["w3"])
        try await events.wait(for: "assetDeferred")
        await engine.shutdown()
    }

    @Test func publishingReachesADeviceWithItsChannelOpenAtOnce() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        try await makeFeed(server, "breaking")
        let (engine, events) = try await start(server, user: "hal") { $0.sync.useWakeUpChannel = true }
        try await events.wait(for: "channelStateChanged")
        try await engine.subscriptions.subscribe(feedId: "breaking")
        try await publish(server, feed: "breaking", [full("b1")])
        // The interval sync is an hour away: only the wake-up can bring it.
        try await events.wait(for: "assetAdded", timeout: .seconds(30)) { if case .assetAdded(let item) = $0 { item.assetId == "b1" } else { false } }
        await engine.shutdown()
    }

    @Test func aThousandEpisodesLandInTheQueueExactlyOnce() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        try await makeFeed(server, "archive")
        let (engine, _) = try await start(server, user: "ida")
        try await engine.subscriptions.subscribe(feedId: "archive")
        for batch in 0..<2 {
            try await publish(server, feed: "archive", (0..<500).map { full("ep-\(batch * 500 + $0)") })
        }
        try await engine.sync()
        let items = try await engine.subscriptions.items(feedId: "archive")
        #expect(items.count == 1000)
        #expect(Set(items.map(\.assetId)).count == 1000)
        // Syncing again finds nothing new.
        try await engine.sync()
        #expect(try await engine.subscriptions.items(feedId: "archive").count == 1000)
        await engine.shutdown()
    }

    @Test func theQueueAndTheCursorSurviveARestart() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        try await makeFeed(server, "kept")
        let dataDir = temporaryDirectory("sdk-subs-restart")
        let first = BackplaneEngine(configuration: server.configuration(user: "kay", dataDirectory: dataDir))
        try await first.start()
        try await first.subscriptions.subscribe(feedId: "kept", maxItems: 1, autodeleteOldItems: false)
        try await publish(server, feed: "kept", [full("k1"), full("k2")])
        try await first.sync()
        let before = try await first.subscriptions.items()
        await first.shutdown()

        let second = BackplaneEngine(configuration: server.configuration(user: "kay", dataDirectory: dataDir))
        let events = EventRecorder(second.events())
        try await second.start()
        #expect(try await second.subscriptions.items() == before)
        #expect(before.map(\.state) == [.queued, .deferred])
        // The stored cursor means nothing is received twice.
        #expect(!events.names.contains("assetAdded"))
        await second.shutdown()
    }

    @Test func subscribingToAnUnknownFeedIsANotFoundError() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let (engine, _) = try await start(server, user: "jo")
        let error = await #expect(throws: BackplaneClientError.self) { try await engine.subscriptions.subscribe(feedId: "missing") }
        #expect(error?.code == .notFound)
        #expect(error?.status == 404)
        await engine.shutdown()
    }

    @Test func episodesSinceADateAreReportedNotQueued() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        try await makeFeed(server, "mine")
        try await makeFeed(server, "other")
        try await publish(server, feed: "other", [full("o1")])
        let (engine, _) = try await start(server, user: "fay")
        try await engine.subscriptions.subscribe(feedId: "mine")
        let all = try await engine.subscriptions.episodesUpdated(since: Date(timeIntervalSince1970: 0), onlySubscribed: false)
        #expect(all.map(\.episode.assetId) == ["o1"])
        #expect(try await engine.subscriptions.episodesUpdated(since: Date(timeIntervalSince1970: 0), onlySubscribed: true).isEmpty)
        #expect(try await engine.subscriptions.items().isEmpty)
        await engine.shutdown()
    }
}
