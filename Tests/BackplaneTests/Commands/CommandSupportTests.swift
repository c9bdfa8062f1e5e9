import Backplane
import Foundation
import HummingbirdTesting
import BackplaneWire
import Testing

/// Vocabularies that grow (issue 50), on the server's side: what a client sends must be a value
/// this server knows, and a command goes only to an SDK that knows its type.
@Suite struct CommandSupportTests {
    @Test func aValueThisServerDoesNotKnowIsA400ThatNamesTheField() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice", device: "phone")
            var request = EnqueueCommandRequest(type: CommandType(rawValue: "renewLicense"), deviceId: "phone")
            let enqueued = try await client.admin(.post, "/v1/admin/commands", json: request)
            #expect(enqueued.status == .badRequest && enqueued.errorCode == .badRequest, "\(enqueued.text)")
            #expect(enqueued.text.contains("'type'") && enqueued.text.contains("deleteAssets"), "\(enqueued.text)")
            request.type = .wipe
            let wipe = try #require(try await client.admin(.post, "/v1/admin/commands", json: request).decode(CommandList.self).commands.first)

            let ack = SyncRequest(acks: [CommandAck(commandId: wipe.commandId, outcome: CommandAck.Outcome(rawValue: "later"))])
            let synced = try await client.device(.post, "/v1/sync", json: ack, as: me)
            #expect(synced.status == .badRequest && synced.text.contains("acks[0].outcome"), "\(synced.text)")
            // Nothing changed: the command was not acknowledged (nor delivered by the refused sync).
            #expect(try await client.admin(.get, "/v1/admin/commands/\(wipe.commandId)").decode(Command.self).state == .pending)

            let listed = try await client.admin(.get, "/v1/admin/commands?state=scheduled")
            #expect(listed.errorCode == .validationFailed && listed.text.contains("pending"), "\(listed.text)")
        }
    }

    /// `syncNow` as if a later release had added it in SDK 0.2.0. The test devices register
    /// with SDK 0.1.0.
    private static let syncNowSince020 = CommandSupport(firstSDKVersion: [.syncNow: SDKVersion("0.2.0")!])

    @Test func aCommandForAnSDKThatPredatesItsTypeFailsAtOnce() async throws {
        let fixture = try await Fixture.make(commandSupport: Self.syncNowSince020)
        try await fixture.test { client in
            let (old, _) = try await client.register(user: "alice", device: "old")
            let (updated, _) = try await client.register(user: "alice", device: "updated")
            // An app update brought SDK 0.2.1: the next sync says so.
            let report = try await client.device(.post, "/v1/sync", json: SyncRequest(sdkVersion: "0.2.1"), as: updated)
            #expect(report.status == .ok)

            let response = try await client.admin(.post, "/v1/admin/commands", json: EnqueueCommandRequest(type: .syncNow, userId: "alice"))
            #expect(response.status == .created, "\(response.text)")
            let commands = Dictionary(uniqueKeysWithValues: try response.decode(CommandList.self).commands.map { ($0.deviceId, $0) })
            #expect(commands["old"]?.state == .failed)
            #expect(commands["old"]?.failureReason == CommandSupport.unsupportedByDevice)
            #expect(commands["old"]?.completedAt != nil)
            #expect(commands["updated"]?.state == .pending)

            // The old device never gets it; the updated one does. Other types still reach both.
            let wipe = try await client.admin(.post, "/v1/admin/commands", json: EnqueueCommandRequest(type: .wipe, deviceId: "old"))
            #expect(try wipe.decode(CommandList.self).commands.first?.state == .pending)
            let oldSync = try await client.device(.post, "/v1/sync", json: SyncRequest(), as: old).decode(SyncResponse.self)
            #expect(oldSync.commands.map(\.type) == [.wipe])
            let updatedSync = try await client.device(.post, "/v1/sync", json: SyncRequest(), as: updated).decode(SyncResponse.self)
            #expect(updatedSync.commands.map(\.type) == [.syncNow])

            let failed = try await client.admin(.get, "/v1/admin/commands?state=failed").decode(CommandPage.self)
            #expect(failed.commands.map(\.deviceId) == ["old"])
        }
    }

    /// A command enqueued while the device ran a newer SDK, and a sync that reports an older one
    /// (the app was rolled back): the command fails at that sync instead of being delivered.
    @Test func aSyncThatReportsAnOlderSDKFailsTheCommandsItCannotRun() async throws {
        let fixture = try await Fixture.make(commandSupport: Self.syncNowSince020)
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "bob", device: "tablet")
            #expect(try await client.device(.post, "/v1/sync", json: SyncRequest(sdkVersion: "0.3"), as: me).status == .ok)
            let enqueued = try await client.admin(.post, "/v1/admin/commands", json: EnqueueCommandRequest(type: .syncNow, deviceId: "tablet"))
            let command = try #require(try enqueued.decode(CommandList.self).commands.first)
            #expect(command.state == .pending)

            let rolledBack = try await client.device(.post, "/v1/sync", json: SyncRequest(sdkVersion: "0.1.9"), as: me).decode(SyncResponse.self)
            #expect(rolledBack.commands.isEmpty)
            let stored = try await client.admin(.get, "/v1/admin/commands/\(command.commandId)").decode(Command.self)
            #expect(stored.state == .failed)
            #expect(stored.failureReason == CommandSupport.unsupportedByDevice)
            #expect(stored.deliveredAt == nil)
        }
    }

    @Test func sdkVersionsCompareNumberByNumber() {
        func version(_ text: String) -> SDKVersion? { SDKVersion(text) }
        #expect(version("0.10.0")! > version("0.9.9")!)
        #expect(version("1.2")! == version("1.2.0")!)
        #expect(version("2.0.0-beta.3")! == version("2.0.0")!)
        #expect(version("1.0+build.7")! < version("1.0.1")!)
        for unreadable in ["", "beta", "1..2", ".1", "99999999999999999999999.1", "1.2.3.4.5.6.7.8.9"] {
            #expect(version(unreadable) == nil, "\(unreadable)")
        }
        let support = Self.syncNowSince020
        #expect(support.supports(.syncNow, onSDK: nil))
        #expect(support.supports(.syncNow, onSDK: "custom-build"))
        #expect(!support.supports(.syncNow, onSDK: "0.1.99"))
        #expect(support.supports(.wipe, onSDK: "0.0.1"))
    }
}
