import Backplane
import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing

@Suite struct FeedTests {
    private func cmsToken(_ fixture: Fixture) async throws -> String {
        try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .cms, name: "cms")
    }

    private func episode(_ id: String, full: Bool = true) -> EpisodeInput {
        full ? EpisodeInput(assetId: id, title: "Episode \(id)", downloadURL: "https://cdn.example.com/\(id).mp4", mediaType: .file,
                            permittedMimeTypes: ["video/mp4"], sizeBytes: 1000, customFields: ["season": .int(1)])
             : EpisodeInput(assetId: id)
    }

    private func publish(_ client: Client, _ token: String, feed: String, _ episodes: [EpisodeInput]) async throws -> TestResponse {
        try await client.admin(.post, "/v1/cms/feeds/\(feed)/episodes", json: PublishEpisodesRequest(episodes: episodes), token: token)
    }

    /// Reads every page of changes from `cursor`; returns the changes and the final cursor.
    private func drain(_ client: Client, _ me: DeviceIdentity, from cursor: String? = nil, limit: Int = 100) async throws -> ([EpisodeChange], String?) {
        var all: [EpisodeChange] = []
        var cursor = cursor
        var pages = 0
        while pages < 10_000 {
            let query = ["limit=\(limit)"] + (cursor.map { ["cursor=\($0)"] } ?? [])
            let response = try await client.device(.get, "/v1/subscriptions/changes?" + query.joined(separator: "&"), as: me)
            #expect(response.status == .ok, "\(response.text)")
            let page = try response.decode(EpisodeChanges.self)
            all += page.changes
            cursor = page.cursor
            pages += 1
            if !page.hasMore { break }
        }
        return (all, cursor)
    }

    @Test func subscribeDeliversCurrentEpisodesThenChangesByCursor() async throws {
        let fixture = try await Fixture.make()
        let cms = try await cmsToken(fixture)
        try await fixture.test { client in
            let created = try await client.admin(.put, "/v1/cms/feeds/show-1", json: FeedInput(title: "Show", metadata: ["genre": .string("drama")]), token: cms)
            #expect(created.status == .created)
            #expect(try await publish(client, cms, feed: "show-1", [episode("e1"), episode("e2", full: false), episode("e3")]).status == .ok)
            let (me, _) = try await client.register(user: "alice", device: "phone")

            let subscribed = try await client.device(.put, "/v1/subscriptions/show-1", json: SubscribeRequest(maxItems: 2, autodeleteOldItems: true), as: me)
            #expect(subscribed.status == .ok, "\(subscribed.text)")
            let answer = try subscribed.decode(SubscribeResponse.self)
            #expect(answer.feed.title == "Show")
            #expect(answer.subscription.maxItems == 2)
            // Newest first, bounded by maxItems.
            #expect(answer.episodes.map(\.episode.assetId) == ["e3", "e2"])
            #expect(answer.episodes.last?.episode.isAssetIdOnly == true)

            // Nothing from before the subscription comes through the cursor.
            let (initial, cursor) = try await drain(client, me)
            #expect(initial.isEmpty)

            _ = try await publish(client, cms, feed: "show-1", [episode("e4")])
            var changed = episode("e1")
            changed.title = "Pilot (remastered)"
            #expect(try await client.admin(.put, "/v1/cms/feeds/show-1/episodes/e1", json: changed, token: cms).status == .ok)
            #expect(try await client.admin(.delete, "/v1/cms/feeds/show-1/episodes/e2", token: cms).status == .noContent)
            // Publishing the same episode again changes nothing.
            _ = try await publish(client, cms, feed: "show-1", [episode("e4")])

            let (changes, next) = try await drain(client, me, from: cursor)
            #expect(changes.map { "\($0.kind.rawValue):\($0.assetId)" } == ["added:e4", "updated:e1", "retracted:e2"])
            #expect(changes[1].episode?.episode.title == "Pilot (remastered)")
            #expect(changes[2].episode == nil)
            #expect(try await drain(client, me, from: next).0.isEmpty)

            let list = try await client.device(.get, "/v1/subscriptions", as: me).decode(SubscriptionList.self)
            #expect(list.subscriptions.map(\.feedId) == ["show-1"])
            #expect(try await client.device(.delete, "/v1/subscriptions/show-1", as: me).status == .noContent)
            _ = try await publish(client, cms, feed: "show-1", [episode("e5")])
            #expect(try await drain(client, me, from: next).0.isEmpty)
        }
    }

    @Test func aThousandEpisodesArriveExactlyOnceAcrossPages() async throws {
        let fixture = try await Fixture.make()
        let cms = try await cmsToken(fixture)
        try await fixture.test { client in
            _ = try await client.admin(.put, "/v1/cms/feeds/big", json: FeedInput(title: "Big"), token: cms)
            let (me, _) = try await client.register(user: "alice", device: "phone")
            _ = try await client.device(.put, "/v1/subscriptions/big", json: SubscribeRequest(), as: me)
            for batch in 0..<2 {
                let episodes = (0..<500).map { episode("ep-\(batch * 500 + $0)") }
                #expect(try await publish(client, cms, feed: "big", episodes).status == .ok)
            }
            let (changes, _) = try await drain(client, me, limit: 97)
            #expect(changes.count == 1000)
            #expect(Set(changes.map(\.assetId)).count == 1000)
            #expect(changes.map(\.assetId) == (0..<1000).map { "ep-\($0)" })
        }
    }

    @Test func devicesSyncingWhilePublishingEndWithExactlyThePublishedSet() async throws {
        let fixture = try await Fixture.make(deviceLimit: -1)
        let cms = try await cmsToken(fixture)
        try await fixture.test { client in
            _ = try await client.admin(.put, "/v1/cms/feeds/live", json: FeedInput(title: "Live"), token: cms)
            var devices: [DeviceIdentity] = []
            for index in 0..<8 {
                let (me, _) = try await client.register(user: "u\(index)", device: "d\(index)")
                _ = try await client.device(.put, "/v1/subscriptions/live", json: SubscribeRequest(), as: me)
                devices.append(me)
            }
            let published = (0..<300).map { "x\($0)" }
            let partialReads = Counter()
            // Devices read their changes in small pages while the CMS publishes in batches.
            let reads = try await withThrowingTaskGroup(of: (Int, [String], String?).self) { group in
                group.addTask {
                    for chunk in stride(from: 0, to: published.count, by: 10) {
                        _ = try await publish(client, cms, feed: "live", published[chunk..<chunk + 10].map { episode($0) })
                        // Paced, so that readers really run between batches; after the first, until a
                        // reader has seen part of the set (a loaded machine may not schedule one sooner).
                        try await Task.sleep(for: .milliseconds(10))
                        let overlap = ContinuousClock.now + .seconds(10)
                        while chunk == 0, partialReads.value == 0, ContinuousClock.now < overlap {
                            try await Task.sleep(for: .milliseconds(5))
                        }
                    }
                    return (-1, [], nil)
                }
                for (index, me) in devices.enumerated() {
                    group.addTask {
                        var seen: [String] = []
                        var cursor: String?
                        let deadline = ContinuousClock.now + .seconds(30)
                        while seen.count < published.count, ContinuousClock.now < deadline {
                            let (changes, next) = try await drain(client, me, from: cursor, limit: 7)
                            seen += changes.map(\.assetId)
                            cursor = next
                            if changes.isEmpty { try await Task.sleep(for: .milliseconds(2)) }
                            if !changes.isEmpty, seen.count < published.count { partialReads.increment() }
                        }
                        return (index, seen, cursor)
                    }
                }
                var reads: [Int: ([String], String?)] = [:]
                for try await (index, seen, cursor) in group where index >= 0 { reads[index] = (seen, cursor) }
                return reads
            }
            #expect(partialReads.value > 0, "no read overlapped the publishing")
            for (index, me) in devices.enumerated() {
                let (seen, cursor) = try #require(reads[index])
                // Continuing from the device's own cursor completes the set: nothing missed, nothing twice.
                let (rest, _) = try await drain(client, me, from: cursor)
                #expect(seen + rest.map(\.assetId) == published, "device \(index)")
            }
        }
    }

    @Test func episodesSinceADateIncludeUnsubscribedFeedsOnRequest() async throws {
        let fixture = try await Fixture.make()
        let cms = try await cmsToken(fixture)
        try await fixture.test { client in
            for feed in ["a", "b"] {
                _ = try await client.admin(.put, "/v1/cms/feeds/\(feed)", json: FeedInput(title: feed), token: cms)
                _ = try await publish(client, cms, feed: feed, [episode("\(feed)1"), episode("\(feed)2")])
            }
            let (me, _) = try await client.register(user: "alice", device: "phone")
            _ = try await client.device(.put, "/v1/subscriptions/a", json: SubscribeRequest(), as: me)
            let since = "1970-01-01T00:00:00Z"
            let subscribed = try await client.device(.get, "/v1/feeds/episodes?since=\(since)", as: me).decode(EpisodeList.self)
            #expect(Set(subscribed.episodes.map(\.episode.assetId)) == ["a1", "a2"])
            var everything: [String] = []
            var cursor: String?
            repeat {
                let page = try await client.device(
                    .get, "/v1/feeds/episodes?since=\(since)&onlySubscribed=false&limit=3" + (cursor.map { "&cursor=\($0)" } ?? ""), as: me
                ).decode(EpisodeList.self)
                everything += page.episodes.map(\.episode.assetId)
                cursor = page.nextCursor
            } while cursor != nil
            #expect(Set(everything) == ["a1", "a2", "b1", "b2"])
            #expect(everything.count == 4)
            let future = try await client.device(.get, "/v1/feeds/episodes?since=2999-01-01T00:00:00Z", as: me).decode(EpisodeList.self)
            #expect(future.episodes.isEmpty)
            #expect(try await client.device(.get, "/v1/feeds/episodes", as: me).status == .badRequest)
            #expect(try await client.device(.get, "/v1/feeds/episodes?since=yesterday", as: me).status == .badRequest)
        }
    }

    @Test func publishingWakesTheSubscribers() async throws {
        let fixture = try await Fixture.make()
        let cms = try await cmsToken(fixture)
        let woken = WakeCounter()
        try await fixture.test { client in
            _ = try await client.admin(.put, "/v1/cms/feeds/news", json: FeedInput(title: "News"), token: cms)
            let (me, _) = try await client.register(user: "alice", device: "phone")
            try await client.register(user: "bob", device: "other")
            _ = try await client.device(.put, "/v1/subscriptions/news", json: SubscribeRequest(), as: me)
            _ = fixture.services.wakeUpHub.register(woken.channel("phone"), applicationId: fixture.applicationId, deviceId: "phone")
            _ = fixture.services.wakeUpHub.register(woken.channel("other"), applicationId: fixture.applicationId, deviceId: "other")
            _ = try await publish(client, cms, feed: "news", [episode("n1")])
            try await woken.waitFor("phone")
            #expect(woken.count("other") == 0)
        }
    }

    @Test func badFeedInputIsRefusedAndChangesNothing() async throws {
        let fixture = try await Fixture.make()
        let cms = try await cmsToken(fixture)
        try await fixture.test { client in
            _ = try await client.admin(.put, "/v1/cms/feeds/f", json: FeedInput(title: "F"), token: cms)
            let (me, _) = try await client.register(user: "alice", device: "phone")
            _ = try await client.device(.put, "/v1/subscriptions/f", json: SubscribeRequest(), as: me)

            #expect(try await publish(client, cms, feed: "nope", [episode("e1")]).status == .notFound)
            #expect(try await client.device(.put, "/v1/subscriptions/nope", json: SubscribeRequest(), as: me).status == .notFound)
            #expect(try await client.device(.delete, "/v1/subscriptions/nope", as: me).status == .notFound)

            let tooMany = try await publish(client, cms, feed: "f", (0...WireLimits.maxEpisodesPerBatch).map { episode("e\($0)") })
            #expect(tooMany.status == .contentTooLarge)
            #expect(tooMany.errorCode == .payloadTooLarge)

            var noMediaType = episode("m1")
            noMediaType.mediaType = nil
            var badURL = episode("m2")
            badURL.downloadURL = "ftp://example.com/x"
            var badDates = episode("m3")
            badDates.publishDate = Date(timeIntervalSince1970: 2_000_000_000)
            badDates.expiryDate = Date(timeIntervalSince1970: 1_000_000_000)
            var negative = episode("m4")
            negative.sizeBytes = -1
            for bad in [[noMediaType], [badURL], [badDates], [negative], [episode("dup"), episode("dup")], [EpisodeInput(assetId: "")], []] {
                let response = try await publish(client, cms, feed: "f", bad)
                #expect(response.status == .badRequest, "\(bad.map(\.assetId))")
                #expect(response.errorCode == .validationFailed)
            }
            let malformed = try await client.admin(.post, "/v1/cms/feeds/f/episodes", json: ["episodes": [["title": "no asset id"]]], token: cms)
            #expect(malformed.status == .badRequest)
            #expect(malformed.errorCode == .badRequest)
            let wrongPath = try await client.admin(.put, "/v1/cms/feeds/f/episodes/other", json: episode("e1"), token: cms)
            #expect(wrongPath.status == .badRequest)

            // Nothing of that reached the feed or the change log.
            #expect(try await drain(client, me).0.isEmpty)
            #expect(try await client.device(.get, "/v1/subscriptions/changes?cursor=bogus", as: me).status == .badRequest)
            #expect(try await client.device(.get, "/v1/subscriptions/changes?limit=0", as: me).status == .badRequest)

            // Scopes: the admin token is not a CMS token.
            let asAdmin = try await client.admin(.get, "/v1/cms/feeds")
            #expect(asAdmin.status == .forbidden)
        }
    }

    @Test func deletingAFeedRetractsItsEpisodes() async throws {
        let fixture = try await Fixture.make()
        let cms = try await cmsToken(fixture)
        try await fixture.test { client in
            _ = try await client.admin(.put, "/v1/cms/feeds/gone", json: FeedInput(title: "Gone"), token: cms)
            let (me, _) = try await client.register(user: "alice", device: "phone")
            _ = try await client.device(.put, "/v1/subscriptions/gone", json: SubscribeRequest(), as: me)
            _ = try await publish(client, cms, feed: "gone", [episode("g1"), episode("g2")])
            let (_, cursor) = try await drain(client, me)
            #expect(try await client.admin(.delete, "/v1/cms/feeds/gone", token: cms).status == .noContent)
            let (changes, _) = try await drain(client, me, from: cursor)
            #expect(Set(changes.map(\.assetId)) == ["g1", "g2"])
            #expect(changes.allSatisfy { $0.kind == .retracted })
            #expect(try await client.admin(.get, "/v1/cms/feeds/gone", token: cms).status == .notFound)
            #expect(try await client.admin(.delete, "/v1/cms/feeds/gone", token: cms).status == .notFound)
            #expect(try await client.admin(.get, "/v1/cms/feeds", token: cms).decode(FeedList.self).feeds.isEmpty)
        }
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

/// A wake-up channel that counts.
final class WakeCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var counts: [String: Int] = [:]

    struct Channel: WakeUpChannel {
        let counter: WakeCounter
        let name: String
        func close() {}
        func wake() { counter.lock.withLock { counter.counts[name, default: 0] += 1 } }
    }

    func channel(_ name: String) -> Channel { Channel(counter: self, name: name) }
    func count(_ name: String) -> Int { lock.withLock { counts[name] ?? 0 } }

    func waitFor(_ name: String) async throws {
        for _ in 0..<200 where count(name) == 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(count(name) > 0, "\(name) was not woken")
    }
}
