import Backplane
import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// Today's harness against a backplane whose queue holds commands of types a later release
/// added (written to its database the way that release would have; this server reads them as
/// they are and sends them): sync, wipe and the event log must go on working (issue 50).
extension HarnessEndToEndTests {
    @Test func todaysHarnessKeepsWorkingBesideCommandsFromALaterRelease() async throws {
        let root = temporaryDirectory("backplane-compat")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        let harness = try backplane.harness(user: "old-app")

        let deviceId = try await harness.register(device: "d1")
        let source = root.appendingPathComponent("movie.mp4")
        try Data(repeating: 1, count: 10_000).write(to: source)
        #expect(try await harness.run(["add-file", "--asset", "a1", "--file", source.path], device: "d1").status == 0)

        // Two commands of later types around a wipe, in the served database.
        let store = try SQLiteStore(directory: URL(fileURLWithPath: backplane.dataDir))
        let now = Date()
        let later = ["renewLicense", "recordLive"].map { type in
            CommandRecord(
                commandId: "later-\(type)", applicationId: backplane.applicationId, deviceId: deviceId, type: CommandType(rawValue: type),
                state: .pending, createdAt: now, updatedAt: now)
        }
        _ = try await store.insertCommands([later[0]])
        let created = try await backplane.admin("POST", "/v1/admin/commands", body: #"{"type": "wipe", "deviceId": "\#(deviceId)"}"#)
        let wipeId = try #require(try JSONDecoder.wire.decode(CommandList.self, from: created).commands.first?.commandId)
        _ = try await store.insertCommands([later[1]])

        let (synced, sync) = try await harness.run(["sync"], device: "d1")
        #expect(synced == 0, "\(sync)")
        #expect(Self.events(sync).filter { $0 == "remoteWipe" }.count == 1)
        #expect(try await harness.run(["assets"], device: "d1").json["assets"] == .array([]))
        func command(_ id: String) async throws -> Command {
            try JSONDecoder.wire.decode(Command.self, from: try await backplane.admin("GET", "/v1/admin/commands/\(id)"))
        }
        #expect(try await command(wipeId).state == .succeeded)
        for record in later {
            let answered = try await command(record.commandId)
            #expect(answered.state == .failed && answered.failureReason == "unsupported", "\(answered)")
        }

        // Later syncs go on, and the event log reaches the backplane: the wipe's and the app's own.
        let (again, _) = try await harness.run(["sync"], device: "d1")
        #expect(again == 0)
        let (logged, log) = try await harness.run(["log", "--type", "custom", "--name", "still-here", "--number", "1"], device: "d1")
        #expect(logged == 0 && Self.events(log).contains("logsSent"), "\(log)")
        let reader = BackplaneServices(store: store)
        let stored = try await storedEvents(reader, applicationId: backplane.applicationId, EventFilter(deviceId: deviceId))
        #expect(stored.contains { $0.event.content.type == .reset && $0.event.content.resetType == .remoteWipe })
        #expect(stored.contains { $0.event.content.type == .assetDeleted && $0.event.content.assetId == "a1" })
        #expect(stored.contains { $0.event.content.customName == "still-here" })
    }
}
