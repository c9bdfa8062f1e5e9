@testable import Backplane
import Foundation
import Logging
import BackplaneWire
import Testing
import TestSupport

/// The store contract (docs/architecture.md), checked through the store protocols alone, so
/// every implementation runs the same suite: each test takes the kind of store as its argument.
/// A new store adds its case to `StoreKind` and must pass unchanged.
enum StoreKind: String, CaseIterable, CustomTestStringConvertible {
    case sqliteFile, sqliteInMemory, postgres

    /// Every kind whose database can be had here: PostgreSQL only where its binaries are
    /// installed (`PostgresCluster` warns when they are not; CI requires them).
    static var allCases: [StoreKind] {
        PostgresCluster.isAvailable ? [.sqliteFile, .sqliteInMemory, .postgres] : [.sqliteFile, .sqliteInMemory]
    }

    var testDescription: String { rawValue }

    func make() async throws -> any BackplaneStore {
        switch self {
        case .sqliteFile:
            let directory = temporaryDirectory("store-conformance")
            return try SQLiteStore(directory: directory)
        case .sqliteInMemory:
            return try SQLiteStore.inMemory()
        case .postgres:
            // A new database each time. The pool runs until the test process ends; it stays small
            // so that the suite's stores together stay within the cluster's connections.
            let url = try await PostgresCluster.shared.database() + "&pool_max=8"
            // The contract is about outcomes, not latency: on two busy cores, 40 transactions
            // queued on one user's lock may wait longer than a request would be allowed to.
            let store = PostgresStore(try PostgresURL(url).configuration, logger: Logger(label: "conformance"), leaseTimeout: .seconds(60))
            Task { await store.run() }
            try await store.migrate()
            return store
        }
    }
}

@Suite struct StoreConformanceTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    func application(in store: any BackplaneStore, deviceLimit: Int = 5) async throws -> String {
        let applications = ApplicationService(store: store, wakeUps: WakeUpHub())
        let (application, _) = try await applications.createApplication(name: "conformance")
        _ = try await applications.updateSettings(applicationId: application.id, ApplicationSettingsUpdate { $0.deviceLimit = deviceLimit })
        return application.id
    }

    func device(_ applicationId: String, _ deviceId: String, user: String, enabled: Bool) -> DeviceRecord {
        DeviceRecord(
            rowId: nil, applicationId: applicationId, deviceId: deviceId, userId: user, externalDeviceId: nil, nickname: nil,
            platform: "linux", model: nil, osVersion: nil, sdkVersion: nil, appVersion: nil, pushToken: nil, downloadEnabled: enabled,
            credentialHash: "hash-\(deviceId)", publicKey: nil, registeredAt: Self.now, updatedAt: Self.now, lastSeenAt: Self.now,
            unregisteredAt: nil)
    }

    /// The limit is decided on a count read in the registration's own transaction: however many
    /// register at once, no more than the limit end up download-enabled.
    @Test(arguments: StoreKind.allCases)
    func theDeviceLimitHoldsUnderConcurrentRegistrations(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store, deviceLimit: 3)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for number in 0..<24 {
                group.addTask {
                    _ = try await store.registerDevice(applicationId: applicationId, deviceId: "d\(number)", userId: "ann") { state in
                        let enable = state.limit.otherEnabledDevices < state.limit.settings.deviceLimit
                        return (DeviceChange(self.device(applicationId, "d\(number)", user: "ann", enabled: enable)), enable)
                    }
                }
            }
            try await group.waitForAll()
        }
        let devices = try await store.devices(applicationId: applicationId, userId: "ann")
        #expect(devices.count == 24)
        #expect(devices.count(where: \.downloadEnabled) == 3)

        // Enabling goes through the same count: concurrent enables stop at the limit too.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for device in devices where !device.downloadEnabled {
                group.addTask {
                    _ = try await store.updateDevice(applicationId: applicationId, deviceId: device.deviceId) { record, limit in
                        var record = record
                        record.downloadEnabled = limit.otherEnabledDevices < limit.settings.deviceLimit
                        return DeviceChange(record)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await store.devices(applicationId: applicationId, userId: "ann").count(where: \.downloadEnabled) == 3)
    }

    /// A grant is decided on counts read in its own transaction: however many ask at once, the
    /// account never holds more than its limit; a device change that releases the device's grants
    /// (an unregistration) does so in the same transaction, and a released grant no longer counts.
    @Test(arguments: StoreKind.allCases)
    func grantsHoldTheirLimitUnderConcurrencyAndEndWithTheDevice(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        _ = try await store.registerDevice(applicationId: applicationId, deviceId: "phone", userId: "ann") { _ in
            (DeviceChange(self.device(applicationId, "phone", user: "ann", enabled: true)), ())
        }
        let limit = 4
        @Sendable func ask(_ assetId: String) async throws -> Bool {
            try await store.grantDownload(applicationId: applicationId, deviceId: "phone", assetId: assetId) { state in
                guard state.accountHeld < limit else { return (nil, false) }
                let grant = DownloadGrantRecord(
                    rowId: nil, grantId: "g-\(assetId)", applicationId: applicationId, userId: "ann", deviceId: "phone", assetId: assetId,
                    state: .active, countsForLifetime: true,
                    window: DownloadWindow(expiryAfterDownloadSeconds: -1, expiryAfterPlaySeconds: -1, offlineViewingPeriodSeconds: -1),
                    grantedAt: Self.now, updatedAt: Self.now)
                return (grant, true)
            }
        }
        let granted = try await withThrowingTaskGroup(of: Bool.self) { group in
            for number in 0..<40 { group.addTask { try await ask("a\(number)") } }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(granted == limit)
        let held = try await store.downloadGrants(applicationId: applicationId, userId: "ann", deviceId: nil, beforeRowId: nil, limit: 100)
        #expect(held.count == limit && held.allSatisfy { $0.state == .active })

        _ = try await store.updateDevice(applicationId: applicationId, deviceId: "phone") { record, _ in
            var record = record
            record.unregisteredAt = Self.now
            return DeviceChange(record, releasing: .all)
        }
        let released = try await store.downloadGrants(applicationId: applicationId, userId: nil, deviceId: "phone", beforeRowId: nil, limit: 100)
        #expect(released.map(\.state) == Array(repeating: .released, count: limit))
        _ = try await store.updateDevice(applicationId: applicationId, deviceId: "phone") { record, _ in
            var record = record
            record.unregisteredAt = nil
            return DeviceChange(record)
        }
        #expect(try await ask("after"))
    }

    /// The permission transaction sees the asset's policy and its newest published episode.
    @Test(arguments: StoreKind.allCases)
    func thePermissionSeesTheAssetsPolicyAndNewestEpisode(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        _ = try await store.registerDevice(applicationId: applicationId, deviceId: "phone", userId: "ann") { _ in
            (DeviceChange(self.device(applicationId, "phone", user: "ann", enabled: true)), ())
        }
        @Sendable func seen() async throws -> (AssetPolicy?, EpisodeInput?) {
            try await store.grantDownload(applicationId: applicationId, deviceId: "phone", assetId: "film") { state in
                (nil, (state.policy, state.episode))
            }
        }
        #expect(try await seen() == (nil, nil))
        // Written out of time order; the newest one is retracted and does not count.
        for (feed, title, at) in [("b", "newer", 60.0), ("a", "older", 0.0), ("c", "retracted", 120.0)] {
            _ = try await store.upsertFeed(FeedRecord(
                applicationId: applicationId, feedId: feed, title: feed, metadata: nil, createdAt: Self.now, updatedAt: Self.now, deletedAt: nil))
            let episode = EpisodeInput(assetId: "film", title: title, expiryAfterPlaySeconds: Int(at))
            _ = try await store.writeEpisodes(applicationId: applicationId, feedId: feed, assetIds: ["film"]) { _ in
                [EpisodeWrite(record: EpisodeRecord(
                    applicationId: applicationId, feedId: feed, assetId: "film", episode: episode, announcedAt: Self.now,
                    updatedAt: Self.now.addingTimeInterval(at), retractedAt: feed == "c" ? Self.now.addingTimeInterval(at) : nil),
                    kind: feed == "c" ? .retracted : .added)]
            }
        }
        #expect(try await seen().1?.title == "newer")

        let policy = AssetPolicy(expiryDate: Self.now.addingTimeInterval(3_600), maxLifetimeDownloads: 2)
        try await store.setAssetPolicy(AssetPolicyRecord(applicationId: applicationId, assetId: "film", policy: policy, updatedAt: Self.now))
        #expect(try await seen().0 == policy)
        #expect(try await store.assetPolicy(applicationId: applicationId, assetId: "film")?.policy == policy)
        #expect(try await store.deleteAssetPolicy(applicationId: applicationId, assetId: "film"))
        #expect(try await !store.deleteAssetPolicy(applicationId: applicationId, assetId: "film"))
        #expect(try await seen().0 == nil)
    }

    /// A nonce is accepted once per key, also when the same request arrives many times at once.
    @Test(arguments: StoreKind.allCases)
    func aNonceIsAcceptedOnceUnderConcurrency(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let record = SignedRequestRecord(keyId: "ak_1", nonce: "0123456789abcdef", signedAt: Self.now, receivedAt: Self.now)
        let accepted = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<20 { group.addTask { try await store.recordSignedRequest(record) } }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(accepted == 1)
        // Many nonces at once, each sent three times (PostgreSQL spends them in groups): each is
        // accepted exactly once.
        let nonces = (0..<40).map { String(format: "nonce-%012d", $0) }
        let acceptedEach = try await withThrowingTaskGroup(of: (String, Bool).self) { group in
            for nonce in nonces + nonces.reversed() + nonces {
                var request = record
                request.nonce = nonce
                group.addTask { [request] in (nonce, try await store.recordSignedRequest(request)) }
            }
            return try await group.reduce(into: [String: Int]()) { $0[$1.0, default: 0] += $1.1 ? 1 : 0 }
        }
        #expect(acceptedEach == Dictionary(uniqueKeysWithValues: nonces.map { ($0, 1) }))
        // Another key may use the same nonce; an expired nonce is forgotten.
        var otherKey = record
        otherKey.keyId = "ak_2"
        #expect(try await store.recordSignedRequest(otherKey))
        #expect(try await store.pruneNonces(expiredBefore: Self.now.addingTimeInterval(601)) == 2 + nonces.count)
        #expect(try await store.recordSignedRequest(record))
    }

    /// The change log is numbered in commit order: a device paging through its changes while
    /// several publishers write sees every change exactly once, in order, with no gap skipped.
    @Test(arguments: StoreKind.allCases)
    func aReaderSeesEveryChangeOnceAndInOrderWhilePublishersWrite(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        let feeds = FeedService(store: store, wakeUps: WakeUpHub())
        let subscriptions = SubscriptionService(store: store)
        for feed in ["a", "b", "c"] {
            _ = try await feeds.putFeed(applicationId: applicationId, feedId: feed, FeedInput(title: feed))
            _ = try await subscriptions.subscribe(applicationId: applicationId, deviceId: "reader", feedId: feed, SubscribeRequest())
        }
        let finished = Flag()
        let publishers = Task {
            defer { finished.raise() }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for feed in ["a", "b", "c"] {
                    group.addTask {
                        for round in 0..<15 {
                            _ = try await feeds.publish(applicationId: applicationId, feedId: feed, PublishEpisodesRequest(
                                episodes: (0..<4).map { EpisodeInput(assetId: "\(feed)-\(round)-\($0)") }))
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        var seen: [EpisodeChangeRecord] = []
        var after: Int64 = 0
        var publishing = true
        while publishing {
            publishing = !finished.isRaised  // read before the page: the last page reads after the end
            let page = try await store.changes(applicationId: applicationId, deviceId: "reader", afterSeq: after, limit: 7)
            seen += page
            after = page.last?.seq ?? after
            if page.isEmpty { try await Task.sleep(for: .milliseconds(1)) }
        }
        try await publishers.value
        while case let page = try await store.changes(applicationId: applicationId, deviceId: "reader", afterSeq: after, limit: 7), !page.isEmpty {
            seen += page
            after = page.last!.seq
        }
        #expect(seen.count == 3 * 15 * 4)
        #expect(Set(seen.map(\.assetId)).count == seen.count, "a change was delivered twice")
        #expect(seen.map(\.seq) == seen.map(\.seq).sorted())
        #expect(seen.map(\.seq) == Array(1...Int64(seen.count)), "numbers are the application's own, without gaps")
    }

    func registered(_ store: any BackplaneStore, _ applicationId: String, _ deviceId: String) async throws {
        _ = try await store.registerDevice(applicationId: applicationId, deviceId: deviceId, userId: "ann") { _ in
            (DeviceChange(self.device(applicationId, deviceId, user: "ann", enabled: true)), ())
        }
    }

    /// Events are stored once per (device, sequence): a retry is a duplicate, a reused sequence
    /// with another event id is refused, and concurrent retries store one copy.
    @Test(arguments: StoreKind.allCases)
    func eventsAreStoredOncePerDeviceAndSequence(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        func record(_ sequence: Int64, eventId: String) -> EventRecord {
            EventRecord(
                applicationId: applicationId, deviceId: "phone",
                event: DeviceEvent(eventId: eventId, sequence: sequence, deviceTime: Self.now, userId: "ann", content: .appLaunch),
                receivedAt: Self.now, correctedTime: Self.now)
        }
        let batch = (1...10).map { record($0, eventId: "e\($0)") }
        let outcomes = try await withThrowingTaskGroup(of: [EventInsertOutcome].self) { group in
            for _ in 0..<4 { group.addTask { try await store.insertEvents(applicationId: applicationId, deviceId: "phone", batch, signedRequest: nil) } }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(outcomes.count(where: { $0 == .inserted }) == 10)
        #expect(outcomes.count(where: { $0 == .duplicate }) == 30)
        #expect(try await store.insertEvents(applicationId: applicationId, deviceId: "phone", [record(3, eventId: "other")], signedRequest: nil)
            == [.sequenceReused])
        // Another device's sequence 1 is its own.
        var other = record(1, eventId: "e1")
        other.deviceId = "tablet"
        #expect(try await store.insertEvents(applicationId: applicationId, deviceId: "tablet", [other], signedRequest: nil) == [.inserted])
        let stored = try await store.events(applicationId: applicationId, filter: EventFilter(), after: nil, limit: 100)
        #expect(stored.count == 11)
    }
}

/// Raised once, read from any task.
private final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var raised = false

    func raise() { lock.withLock { raised = true } }
    var isRaised: Bool { lock.withLock { raised } }
}
