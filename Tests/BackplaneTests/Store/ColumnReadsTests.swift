@testable import Backplane
import Foundation
import GRDB
import Synchronization
import TestSupport
import Testing

/// The sync's device read steps its statement itself and reads text and dates straight from
/// SQLite (`StatementColumns`). A value stored in another form than the store writes (by
/// another version, or by hand) must read as GRDB reads it through a `Row`, or fail as it does.
struct ColumnReadsTests {
    private static let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func valuesInOtherStoredFormsReadAsGRDBReadsThem() async throws {
        let directory = temporaryDirectory("backplane-column-reads")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(directory: directory)
        let applications = ApplicationService(store: store, wakeUps: WakeUpHub())
        let applicationId = try await applications.createApplication(name: "columns").0.id
        _ = try await store.registerDevice(applicationId: applicationId, deviceId: "phone", userId: "ann") { _ in
            (DeviceChange(DeviceRecord(
                rowId: nil, applicationId: applicationId, deviceId: "phone", userId: "ann", externalDeviceId: nil, nickname: nil,
                platform: "linux", model: "m", osVersion: nil, sdkVersion: nil, appVersion: nil, pushToken: nil, downloadEnabled: true,
                credentialHash: "hash", publicKey: nil, registeredAt: Self.now, updatedAt: Self.now, lastSeenAt: Self.now,
                unregisteredAt: nil)), ())
        }
        _ = try await store.insertCommands([CommandRecord(
            commandId: "c1", applicationId: applicationId, deviceId: "phone", type: .wipe, assetIds: nil, state: .pending,
            createdAt: Self.now, updatedAt: Self.now, deferrals: 0)])
        // Another connection stores what this store never writes: a blob for a text, a number
        // and another text form for dates, NULL where there was text.
        let other = try DatabaseQueue(path: directory.appendingPathComponent("backplane.sqlite").path)
        try await other.write { db in
            try db.execute(sql: """
                UPDATE devices SET nickname = X'6869', registered_at = 1704110400, last_seen_at = '2024-01-01T12:00:00', model = NULL
                WHERE device_id = 'phone'
                """)
            try db.execute(sql: "UPDATE commands SET created_at = 1704110400.5, failure_reason = X'6F6B' WHERE command_id = 'c1'")
        }
        // Sign-in's read (one statement, the command's columns after the device's) and the sync's
        // own reads in its write, each through `ColumnCursor`.
        @Sendable func syncRead() async throws -> (DeviceRecord, [CommandRecord]) {
            let read = Mutex<SyncSnapshot?>(nil)
            let plan = SyncPlan(applicationId: applicationId, deviceId: "phone", signedIn: nil, reportedGrantIds: [], ackedCommandIds: []) {
                snapshot in
                read.withLock { $0 = snapshot }
                return SyncDecision(deviceAfter: snapshot.device, releasedAt: Self.now)
            }
            _ = try await store.sync(plan, spending: nil)
            let snapshot = try #require(read.withLock { $0 })
            return (snapshot.device, snapshot.openCommands)
        }
        let (device, commands) = try #require(try await store.deviceWithOpenCommands(applicationId: applicationId, deviceId: "phone"))
        let (syncDevice, syncCommands) = try await syncRead()
        #expect(syncDevice == device && syncCommands == commands)
        #expect(device.nickname == "hi" && device.model == nil)
        #expect(device.registeredAt == Date(timeIntervalSince1970: 1_704_110_400))
        #expect(device.lastSeenAt == Date(timeIntervalSince1970: 1_704_110_400))
        #expect(commands.first?.createdAt == Date(timeIntervalSince1970: 1_704_110_400.5))
        #expect(commands.first?.failureReason == "ok")
        // The same rows through GRDB's `Row`.
        let (byRow, commandsByRow) = try await other.read { db in
            (try DeviceRecord.fetchOne(db, sql: "SELECT \(DeviceRecord.selectSQL) FROM devices WHERE device_id = 'phone'"),
             try CommandRecord.fetchAll(db, sql: "SELECT \(CommandRecord.selectSQL) FROM commands"))
        }
        #expect(device == byRow)
        #expect(commands == commandsByRow)

        // A text column holding bytes that are not UTF-8 converts in neither.
        try await other.write { db in try db.execute(sql: "UPDATE devices SET platform = X'FF' WHERE device_id = 'phone'") }
        await #expect(throws: DecodingError.self) { try await store.deviceWithOpenCommands(applicationId: applicationId, deviceId: "phone") }
        await #expect(throws: DecodingError.self) { try await syncRead() }
        await #expect(throws: (any Error).self) {
            try await other.read { db in try DeviceRecord.fetchOne(db, sql: "SELECT \(DeviceRecord.selectSQL) FROM devices") }
        }
    }
}
