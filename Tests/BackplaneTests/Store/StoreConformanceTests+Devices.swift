@testable import Backplane
import Foundation
import Synchronization
import BackplaneWire
import Testing

/// Device rows as the store reads and writes them, on every store kind.
extension StoreConformanceTests {
    /// Every field of a device reads back as it was written.
    @Test(arguments: StoreKind.allCases)
    func aDeviceReadsBackAsWritten(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        var written = device(applicationId, "phone", user: "ann", enabled: true)
        written.externalDeviceId = "crm-1"
        written.nickname = "Ann's phone"
        written.model = "model"
        written.osVersion = "os"
        written.sdkVersion = "sdk"
        written.appVersion = "app"
        written.pushToken = "push"
        written.publicKey = "key"
        written.updatedAt = Self.now.addingTimeInterval(1)
        written.lastSeenAt = Self.now.addingTimeInterval(2)
        written.unregisteredAt = Self.now.addingTimeInterval(3)
        let toWrite = written
        let stored = try await store.registerDevice(applicationId: applicationId, deviceId: "phone", userId: "ann") { _ in (DeviceChange(toWrite), ()) }.0
        let read = try #require(try await store.device(applicationId: applicationId, deviceId: "phone"))
        #expect(read == stored)
        written.rowId = read.rowId
        #expect(read == written)
    }

    /// Last-seen times written in a batch only move forward, and a batch naming a device that
    /// is gone writes the rest.
    @Test(arguments: StoreKind.allCases)
    func lastSeenTimesOnlyMoveForward(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        try await registered(store, applicationId, "phone")
        try await registered(store, applicationId, "tablet")
        let later = Self.now.addingTimeInterval(60)
        try await store.recordLastSeen([
            DeviceSighting(applicationId: applicationId, deviceId: "phone", at: later),
            DeviceSighting(applicationId: applicationId, deviceId: "gone", at: later),
            DeviceSighting(applicationId: applicationId, deviceId: "tablet", at: Self.now.addingTimeInterval(-60)),
        ])
        #expect(try await store.device(applicationId: applicationId, deviceId: "phone")?.lastSeenAt == later)
        #expect(try await store.device(applicationId: applicationId, deviceId: "tablet")?.lastSeenAt == Self.now)
        #expect(try await store.device(applicationId: applicationId, deviceId: "gone") == nil)
    }

    /// Every field of a command reads back as it was inserted, and as it was updated by a sync.
    @Test(arguments: StoreKind.allCases)
    func aCommandReadsBackAsWritten(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        try await registered(store, applicationId, "phone")
        let written = CommandRecord(
            commandId: "c1", applicationId: applicationId, deviceId: "phone", type: .deleteAssets, assetIds: ["film/1", "é"],
            state: .delivered, createdAt: Self.now, updatedAt: Self.now.addingTimeInterval(1), expiresAt: Self.now.addingTimeInterval(3_600),
            deliveredAt: Self.now.addingTimeInterval(2), completedAt: nil, failureReason: "earlier \"reason\"", deferrals: 2)
        let inserted = try #require(try await store.insertCommands([written]).first)
        #expect(try await store.command(applicationId: applicationId, commandId: "c1") == inserted)
        var expected = written
        expected.rowId = inserted.rowId
        #expect(inserted == expected)

        let done = Self.now.addingTimeInterval(10)
        let acknowledged = SyncPlan(
            applicationId: applicationId, deviceId: "phone", signedIn: nil, reportedGrantIds: [], ackedCommandIds: ["c1"]
        ) { snapshot in
            var decision = SyncDecision(deviceAfter: snapshot.device, releasedAt: done)
            if var updated = snapshot.ackedCommands["c1"] {
                (updated.state, updated.completedAt, updated.updatedAt, updated.failureReason) = (.failed, done, done, "disk full")
                decision.commands = [updated]
            }
            return decision
        }
        _ = try await store.sync(acknowledged, spending: nil)
        (expected.state, expected.completedAt, expected.updatedAt, expected.failureReason) = (.failed, done, done, "disk full")
        #expect(try await store.command(applicationId: applicationId, commandId: "c1") == expected)

        // No asset ids, as for a wipe, read back as none.
        let wipe = CommandRecord(
            commandId: "c2", applicationId: applicationId, deviceId: "phone", type: .wipe, assetIds: nil, state: .pending,
            createdAt: Self.now, updatedAt: Self.now, deferrals: 0)
        let insertedWipe = try #require(try await store.insertCommands([wipe]).first)
        #expect(try await store.command(applicationId: applicationId, commandId: "c2")?.assetIds == nil)
        #expect(insertedWipe.assetIds == nil)
    }

    /// Sign-in's read: the device with its open commands, in delivery order; the sync's own read
    /// in its write finds the same.
    @Test(arguments: StoreKind.allCases)
    func aDeviceIsReadWithItsOpenCommands(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        try await registered(store, applicationId, "phone")
        try await registered(store, applicationId, "tablet")
        try await registered(store, applicationId, "tv")
        let plan: [(String, String, CommandState)] = [
            ("c1", "phone", .pending), ("c2", "phone", .succeeded), ("c3", "tablet", .pending), ("c4", "phone", .delivered), ("c5", "phone", .cancelled),
        ]  // c1 before c4, where an index by state would put c4 first
        _ = try await store.insertCommands(plan.map { id, device, state in
            CommandRecord(
                commandId: id, applicationId: applicationId, deviceId: device, type: .wipe, assetIds: nil, state: state, createdAt: Self.now,
                updatedAt: Self.now, deferrals: 0)
        })
        let (device, open) = try #require(try await store.deviceWithOpenCommands(applicationId: applicationId, deviceId: "phone"))
        #expect(device == (try await store.device(applicationId: applicationId, deviceId: "phone")))
        #expect(open.map(\.commandId) == ["c1", "c4"])
        // Whole records, as the other reads return them.
        #expect(open == (try await store.commands(applicationId: applicationId, deviceId: "phone")).filter { !$0.state.isFinished })
        #expect(try await store.deviceWithOpenCommands(applicationId: applicationId, deviceId: "gone") == nil)
        // A device with none, and one with only another device's.
        let (tv, none) = try #require(try await store.deviceWithOpenCommands(applicationId: applicationId, deviceId: "tv"))
        #expect(tv == (try await store.device(applicationId: applicationId, deviceId: "tv")) && none.isEmpty)
        #expect(try await store.deviceWithOpenCommands(applicationId: applicationId, deviceId: "tablet")?.1.map(\.commandId) == ["c3"])

        // The sync's own read, in its write, finds the same.
        for deviceId in ["phone", "tv", "tablet"] {
            let seen = Mutex<SyncSnapshot?>(nil)
            _ = try await store.sync(SyncPlan(
                applicationId: applicationId, deviceId: deviceId, signedIn: nil, reportedGrantIds: [], ackedCommandIds: []
            ) { read in
                seen.withLock { $0 = read }
                return SyncDecision(deviceAfter: read.device, releasedAt: Self.now)
            }, spending: nil)
            let read = try #require(seen.withLock { $0 })
            let signedIn = try await store.deviceWithOpenCommands(applicationId: applicationId, deviceId: deviceId)
            #expect(read.device == signedIn?.0 && read.openCommands == signedIn?.1, "\(deviceId)")
        }
        // Acknowledged commands are read whoever's and whatever their state (the rules judge
        // them); unknown ones are not there. The open ones stay the device's own.
        let acking = Mutex<SyncSnapshot?>(nil)
        _ = try await store.sync(SyncPlan(
            applicationId: applicationId, deviceId: "phone", signedIn: nil, reportedGrantIds: [], ackedCommandIds: ["c3", "c2", "nope"]
        ) { read in
            acking.withLock { $0 = read }
            return SyncDecision(deviceAfter: read.device, releasedAt: Self.now)
        }, spending: nil)
        let acked = try #require(acking.withLock { $0 })
        #expect(acked.ackedCommands.keys.sorted() == ["c2", "c3"])
        #expect(acked.ackedCommands["c3"]?.deviceId == "tablet" && acked.ackedCommands["c2"]?.state == .succeeded)
        #expect(acked.openCommands.map(\.commandId) == ["c1", "c4"])
        #expect(acked.device == (try await store.device(applicationId: applicationId, deviceId: "phone")))
        await #expect(throws: StoreError.self) {
            _ = try await store.sync(SyncPlan(
                applicationId: applicationId, deviceId: "gone", signedIn: nil, reportedGrantIds: [], ackedCommandIds: ["c1"]
            ) { SyncDecision(deviceAfter: $0.device, releasedAt: Self.now) }, spending: nil)
        }
        await #expect(throws: StoreError.self) {
            _ = try await store.sync(SyncPlan(
                applicationId: applicationId, deviceId: "gone", signedIn: nil, reportedGrantIds: [], ackedCommandIds: []
            ) { SyncDecision(deviceAfter: $0.device, releasedAt: Self.now) }, spending: nil)
        }
    }

    /// Sign-in reads made at the same time (which PostgreSQL answers in groups, one statement
    /// for many devices) each find their own device and commands, as a read made alone does.
    @Test(arguments: StoreKind.allCases)
    func signInReadsMadeTogetherEachFindTheirOwnDevice(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        let deviceIds = (0..<6).map { "device-\($0)" }
        for deviceId in deviceIds { try await registered(store, applicationId, deviceId) }
        // Device i holds i open commands, and one finished one the read leaves out.
        _ = try await store.insertCommands(deviceIds.enumerated().flatMap { i, deviceId in
            (0...i).map { k in
                CommandRecord(
                    commandId: "\(deviceId)-\(k)", applicationId: applicationId, deviceId: deviceId, type: .wipe, assetIds: nil,
                    state: k == 0 ? .succeeded : .pending, createdAt: Self.now, updatedAt: Self.now, deferrals: 0)
            }
        })
        let asked = (0..<60).map { n in n % 7 == 6 ? "unknown-\(n)" : deviceIds[n % 6] }
        let answers = try await withThrowingTaskGroup(of: (Int, DeviceRecord?, [String]).self) { group in
            for (n, deviceId) in asked.enumerated() {
                group.addTask {
                    let read = try await store.deviceWithOpenCommands(applicationId: applicationId, deviceId: deviceId)
                    return (n, read?.0, read?.1.map(\.commandId) ?? [])
                }
            }
            return try await group.reduce(into: [:]) { $0[$1.0] = ($1.1, $1.2) }
        }
        for (n, deviceId) in asked.enumerated() {
            let (device, commands) = try #require(answers[n])
            guard let i = deviceIds.firstIndex(of: deviceId) else {
                #expect(device == nil, "\(deviceId)")
                continue
            }
            #expect(device?.deviceId == deviceId)
            #expect(commands == (0...i).dropFirst().map { "\(deviceId)-\($0)" }, "\(deviceId)")
        }
    }
}
