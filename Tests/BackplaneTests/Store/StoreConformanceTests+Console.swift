@testable import Backplane
import Foundation
import BackplaneWire
import Testing

/// What the console and the application-wide command list read, on every store kind.
extension StoreConformanceTests {
    /// The command list goes newest first under every combination of filters, pages by row id,
    /// and the counts per state add up to what was written.
    @Test(arguments: StoreKind.allCases)
    func theCommandListFiltersNewestFirstAndCountsByState(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        let otherApplication = try await application(in: store)
        let plan: [(String, CommandType, CommandState)] = [
            ("phone", .wipe, .pending), ("phone", .syncNow, .succeeded), ("tablet", .wipe, .failed),
            ("tablet", .syncNow, .pending), ("phone", .wipe, .failed), ("tablet", .kill, .delivered),
        ]
        let inserted = try await store.insertCommands(plan.enumerated().map { index, entry in
            CommandRecord(
                commandId: "c\(index)", applicationId: applicationId, deviceId: entry.0, type: entry.1, assetIds: nil, state: entry.2,
                createdAt: Self.now, updatedAt: Self.now, deferrals: 0)
        })
        _ = try await store.insertCommands([CommandRecord(
            commandId: "elsewhere", applicationId: otherApplication, deviceId: "phone", type: .wipe, assetIds: nil, state: .pending,
            createdAt: Self.now, updatedAt: Self.now, deferrals: 0)])
        func ids(_ filter: CommandFilter, before: Int64? = nil, limit: Int = 10) async throws -> [String] {
            try await store.commands(applicationId: applicationId, filter: filter, beforeRowId: before, limit: limit).map(\.commandId)
        }
        #expect(try await ids(CommandFilter()) == ["c5", "c4", "c3", "c2", "c1", "c0"])
        #expect(try await ids(CommandFilter(state: .pending)) == ["c3", "c0"])
        #expect(try await ids(CommandFilter(type: .wipe)) == ["c4", "c2", "c0"])
        #expect(try await ids(CommandFilter(state: .failed, type: .wipe)) == ["c4", "c2"])
        #expect(try await ids(CommandFilter(deviceId: "tablet", state: .pending)) == ["c3"])
        let third = try #require(inserted[3].rowId)
        #expect(try await ids(CommandFilter(), before: third, limit: 2) == ["c2", "c1"])

        let counts = try await store.commandCounts(applicationId: applicationId, at: Self.now)
        #expect(counts == [.pending: 2, .succeeded: 1, .failed: 2, .delivered: 1])
    }

    /// Open commands past their expiry become expired, in batches, whichever application; the
    /// rest keep their state.
    @Test(arguments: StoreKind.allCases)
    func openCommandsPastTheirExpiryAreMarkedExpired(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let first = try await application(in: store), second = try await application(in: store)
        let plan: [(String, String, CommandState, TimeInterval?)] = [
            ("past-pending", first, .pending, -60), ("past-delivered", second, .delivered, -30), ("past-pending-2", first, .pending, -10),
            ("future", first, .pending, 60), ("never", first, .pending, nil), ("finished", first, .succeeded, -60),
        ]
        _ = try await store.insertCommands(plan.map { id, app, state, expiry in
            CommandRecord(
                commandId: id, applicationId: app, deviceId: "phone", type: .wipe, assetIds: nil, state: state, createdAt: Self.now.addingTimeInterval(-120),
                updatedAt: Self.now.addingTimeInterval(-120), expiresAt: expiry.map { Self.now.addingTimeInterval($0) }, deferrals: 0)
        })
        // Counted with expiry applied before any is marked: the three past their expiry are expired already.
        #expect(try await store.commandCounts(applicationId: first, at: Self.now) == [.expired: 2, .pending: 2, .succeeded: 1])
        #expect(try await store.commandCounts(applicationId: second, at: Self.now) == [.expired: 1])
        let passes = [
            try await store.expireCommands(at: Self.now, limit: 2), try await store.expireCommands(at: Self.now, limit: 2),
            try await store.expireCommands(at: Self.now, limit: 2),
        ]
        #expect(passes == [2, 1, 0])
        #expect(try await store.commandCounts(applicationId: first, at: Self.now) == [.expired: 2, .pending: 2, .succeeded: 1])
        for (id, app, state, expiry) in plan {
            let command = try #require(try await store.command(applicationId: app, commandId: id))
            let expected: CommandState = state.isFinished || (expiry ?? 1) > 0 ? state : .expired
            #expect(command.state == expected, "\(id)")
            if expected == .expired {
                #expect(command.completedAt == Self.now.addingTimeInterval(expiry ?? 0), "\(id)")
                #expect(command.updatedAt == Self.now, "\(id)")
            }
        }
    }

    /// The overview's figures: registered devices only, those enabled, those seen since a time.
    @Test(arguments: StoreKind.allCases)
    func theFleetSummaryCountsRegisteredDevices(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        for (deviceId, enabled, seen, unregistered) in [
            ("a", true, 0.0, false), ("b", false, 100.0, false), ("c", true, 200.0, false), ("d", true, 300.0, true),
        ] {
            var record = device(applicationId, deviceId, user: "ann", enabled: enabled)
            record.lastSeenAt = Self.now.addingTimeInterval(seen)
            record.nickname = "nick-\(deviceId)"
            if unregistered { record.unregisteredAt = Self.now }
            let toWrite = record
            _ = try await store.registerDevice(applicationId: applicationId, deviceId: deviceId, userId: "ann") { _ in (DeviceChange(toWrite), ()) }
        }
        let summary = try await store.fleetSummary(applicationId: applicationId, seenSince: Self.now.addingTimeInterval(100))
        #expect(summary == FleetSummary(registeredDevices: 3, downloadEnabledDevices: 2, devicesSeenSince: 2))
        let empty = try await store.fleetSummary(applicationId: try await application(in: store), seenSince: Self.now)
        #expect(empty == FleetSummary(registeredDevices: 0, downloadEnabledDevices: 0, devicesSeenSince: 0))

        let byNickname = try await store.devices(
            applicationId: applicationId, filter: DeviceFilter(nickname: "nick-d", includeUnregistered: true), afterRowId: nil, limit: 10)
        #expect(byNickname.map(\.deviceId) == ["d"])
        #expect(try await store.devices(applicationId: applicationId, filter: DeviceFilter(nickname: "nick-d"), afterRowId: nil, limit: 10).isEmpty)
    }

    @Test(arguments: StoreKind.allCases)
    func subscribersAreCountedPerFeed(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        let feeds = FeedService(store: store, wakeUps: WakeUpHub())
        let subscriptions = SubscriptionService(store: store)
        for feed in ["news", "sport"] { _ = try await feeds.putFeed(applicationId: applicationId, feedId: feed, FeedInput(title: feed)) }
        for deviceId in ["a", "b", "c"] {
            _ = try await subscriptions.subscribe(applicationId: applicationId, deviceId: deviceId, feedId: "news", SubscribeRequest())
        }
        _ = try await subscriptions.subscribe(applicationId: applicationId, deviceId: "a", feedId: "sport", SubscribeRequest())
        #expect(try await store.subscriberCount(applicationId: applicationId, feedId: "news") == 3)
        #expect(try await store.subscriberCount(applicationId: applicationId, feedId: "sport") == 1)
        #expect(try await store.subscriberCount(applicationId: applicationId, feedId: "none") == 0)
    }
}
