import Backplane
import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing

@Suite struct CommandTests {
    private func sync(_ client: Client, _ me: DeviceIdentity, acks: [CommandAck] = [], at time: Date = Date()) async throws -> SyncResponse {
        let response = try await client.device(.post, "/v1/sync", json: SyncRequest(acks: acks.isEmpty ? nil : acks), as: me, at: time)
        #expect(response.status == .ok, "\(response.text)")
        return try response.decode(SyncResponse.self)
    }

    private func enqueue(_ client: Client, _ request: EnqueueCommandRequest) async throws -> [Command] {
        let response = try await client.admin(.post, "/v1/admin/commands", json: request)
        #expect(response.status == .created, "\(response.text)")
        return try response.decode(CommandList.self).commands
    }

    private func state(_ client: Client, _ commandId: String) async throws -> Command {
        try await client.admin(.get, "/v1/admin/commands/\(commandId)").decode(Command.self)
    }

    /// A sync records its nonce in its own write (one commit instead of two): each kind of sync
    /// is refused when replayed, and the refused replay changes nothing.
    @Test func replayedSyncsAreRefusedAndChangeNothing() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice", device: "phone")
            func signed(_ request: SyncRequest, nonce: String) throws -> (HTTPFields, Data) {
                let body = try Client.encode(request)
                let headers = fixture.signer.headers(
                    method: .post, path: "/v1/sync", body: body, deviceId: me.deviceId, credential: me.credential, nonce: nonce)
                return (headers, body)
            }
            func sendTwice(_ request: SyncRequest, nonce: String) async throws {
                let (headers, body) = try signed(request, nonce: nonce)
                let first = try await client.raw(.post, "/v1/sync", headers: headers, body: body)
                #expect(first.status == .ok, "\(first.text)")
                let replay = try await client.raw(.post, "/v1/sync", headers: headers, body: body)
                #expect(replay.status == .unauthorized && replay.errorCode == .nonceReused, "\(replay.text)")
            }

            // Delivering a command: the command section's write records the nonce.
            let wipe = try #require(try await enqueue(client, EnqueueCommandRequest(type: .wipe, deviceId: "phone")).first)
            try await sendTwice(SyncRequest(), nonce: "delivering-sync-nonce-1")
            #expect(try await state(client, wipe.commandId).state == .delivered)

            // Acknowledging: a replay must not deliver the command enqueued after the first.
            let (headers, body) = try signed(SyncRequest(acks: [CommandAck(commandId: wipe.commandId, outcome: .succeeded)]), nonce: "ack-sync-nonce-0001")
            #expect(try await client.raw(.post, "/v1/sync", headers: headers, body: body).status == .ok)
            #expect(try await state(client, wipe.commandId).state == .succeeded)
            let later = try #require(try await enqueue(client, EnqueueCommandRequest(type: .deleteAssets, deviceId: "phone", assetIds: ["a"])).first)
            let replay = try await client.raw(.post, "/v1/sync", headers: headers, body: body)
            #expect(replay.status == .unauthorized && replay.errorCode == .nonceReused, "\(replay.text)")
            #expect(try await state(client, later.commandId).state == .pending)

            // Nothing to write: the nonce is recorded alone.
            _ = try await sync(client, me, acks: [CommandAck(commandId: later.commandId, outcome: .succeeded)])
            _ = try await sync(client, me, acks: [CommandAck(commandId: later.commandId, outcome: .succeeded)])
            try await sendTwice(SyncRequest(), nonce: "quiet-sync-nonce-0001")
        }
    }

    @Test func commandIsDeliveredAcknowledgedOnceAndNeverAgain() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice", device: "phone")
            let wipe = try #require(try await enqueue(client, EnqueueCommandRequest(type: .wipe, deviceId: "phone")).first)
            #expect(wipe.state == .pending)
            #expect(UUID(uuidString: wipe.commandId) != nil)

            let first = try await sync(client, me)
            #expect(first.commands.map(\.commandId) == [wipe.commandId])
            #expect(first.commands.first?.state == .delivered)
            #expect(try await state(client, wipe.commandId).deliveredAt != nil)

            // Not acknowledged yet: it comes again.
            #expect(try await sync(client, me).commands.map(\.commandId) == [wipe.commandId])

            let acked = try await sync(client, me, acks: [CommandAck(commandId: wipe.commandId, outcome: .succeeded)])
            #expect(acked.ackResults == [CommandAckResult(commandId: wipe.commandId, status: .accepted)])
            #expect(acked.commands.isEmpty)
            let done = try await state(client, wipe.commandId)
            #expect(done.state == .succeeded)
            let completedAt = try #require(done.completedAt)

            // A repeated ack, even with another outcome, changes nothing.
            let again = try await sync(client, me, acks: [CommandAck(commandId: wipe.commandId, outcome: .failed, reason: "late")])
            #expect(again.ackResults.first?.status == .duplicate)
            let unchanged = try await state(client, wipe.commandId)
            #expect(unchanged.state == .succeeded)
            #expect(unchanged.completedAt == completedAt)
            #expect(unchanged.failureReason == nil)
        }
    }

    @Test func commandsComeInOrderAndFailuresKeepTheReason() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice", device: "phone")
            let first = try await enqueue(client, EnqueueCommandRequest(type: .deleteAssets, deviceId: "phone", assetIds: ["a1", "a2"]))[0]
            let second = try await enqueue(client, EnqueueCommandRequest(type: .syncNow, deviceId: "phone"))[0]
            let synced = try await sync(client, me)
            #expect(synced.commands.map(\.commandId) == [first.commandId, second.commandId])
            #expect(synced.commands.first?.assetIds == ["a1", "a2"])

            _ = try await sync(client, me, acks: [
                CommandAck(commandId: first.commandId, outcome: .failed, reason: "disk read-only"),
                CommandAck(commandId: second.commandId, outcome: .deferred, reason: "busy"),
            ])
            let failed = try await state(client, first.commandId)
            #expect(failed.state == .failed)
            #expect(failed.failureReason == "disk read-only")
            let deferred = try await state(client, second.commandId)
            #expect(deferred.state == .delivered)
            #expect(deferred.deferrals == 1)
            // A deferred command is sent again.
            #expect(try await sync(client, me).commands.map(\.commandId) == [second.commandId])
        }
    }

    @Test func anAckForAnotherDevicesCommandIsRejected() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (phone, _) = try await client.register(user: "alice", device: "phone")
            try await client.register(user: "alice", device: "tablet")
            let tabletWipe = try await enqueue(client, EnqueueCommandRequest(type: .wipe, deviceId: "tablet"))[0]
            let answer = try await sync(client, phone, acks: [
                CommandAck(commandId: tabletWipe.commandId, outcome: .succeeded),
                CommandAck(commandId: "no-such-command", outcome: .succeeded),
            ])
            #expect(answer.ackResults.map(\.status) == [.rejected, .rejected])
            #expect(try await state(client, tabletWipe.commandId).state == .pending)
        }
    }

    @Test func aSucceededKillUnregistersTheDevice() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice", device: "phone")
            let kill = try await enqueue(client, EnqueueCommandRequest(type: .kill, deviceId: "phone"))[0]
            _ = try await sync(client, me)
            let answer = try await sync(client, me, acks: [CommandAck(commandId: kill.commandId, outcome: .succeeded)])
            #expect(answer.ackResults.first?.status == .accepted)
            #expect(answer.device.unregisteredAt != nil)
            #expect(answer.device.downloadEnabled == false)
            let after = try await client.device(.post, "/v1/sync", json: SyncRequest(), as: me)
            #expect(after.errorCode == .deviceUnregistered)
        }
    }

    @Test func userAndExternalIdTargetsReachEveryRegisteredDevice() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await client.register(user: "alice", device: "phone", external: "crm-1")
            try await client.register(user: "alice", device: "tablet")
            let (gone, _) = try await client.register(user: "alice", device: "old")
            _ = try await client.device(.post, "/v1/devices/old/unregister", as: gone)
            try await client.register(user: "bob", device: "bobs")

            let forUser = try await enqueue(client, EnqueueCommandRequest(type: .wipe, userId: "alice"))
            #expect(Set(forUser.map(\.deviceId)) == ["phone", "tablet"])
            #expect(Set(forUser.map(\.commandId)).count == 2)
            let forExternal = try await enqueue(client, EnqueueCommandRequest(type: .syncNow, externalDeviceId: "crm-1"))
            #expect(forExternal.map(\.deviceId) == ["phone"])

            let listed = try await client.admin(.get, "/v1/admin/devices/phone/commands").decode(CommandList.self)
            #expect(listed.commands.map(\.type) == [.wipe, .syncNow])
        }
    }

    @Test func pendingCommandsCanBeCancelledDeliveredOnesCannot() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice", device: "phone")
            let first = try await enqueue(client, EnqueueCommandRequest(type: .wipe, deviceId: "phone"))[0]
            _ = try await sync(client, me)
            let second = try await enqueue(client, EnqueueCommandRequest(type: .kill, deviceId: "phone"))[0]

            let refused = try await client.admin(.post, "/v1/admin/commands/\(first.commandId)/cancel")
            #expect(refused.status == .conflict)
            #expect(try await state(client, first.commandId).state == .delivered)

            let cancelled = try await client.admin(.post, "/v1/admin/commands/\(second.commandId)/cancel")
            #expect(cancelled.status == .ok)
            #expect(try cancelled.decode(Command.self).state == .cancelled)
            #expect(try await sync(client, me).commands.map(\.commandId) == [first.commandId])
            #expect(try await client.admin(.post, "/v1/admin/commands/nope/cancel").status == .notFound)
        }
    }

    @Test func expiredCommandsAreNotSent() async throws {
        let clock = TestClock()
        let fixture = try await Fixture.make(clock: clock)
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice", device: "phone")
            let command = try await enqueue(client, EnqueueCommandRequest(
                type: .wipe, deviceId: "phone", expiresAt: clock.now.addingTimeInterval(600)))[0]
            clock.advance(by: 601)
            #expect(try await state(client, command.commandId).state == .pending)  // stored state until touched
            let listed = try await client.admin(.get, "/v1/admin/devices/phone/commands").decode(CommandList.self)
            #expect(listed.commands.first?.state == .expired)
            // The server checks signatures against its own (test) clock.
            let answer = try await sync(client, me, acks: [CommandAck(commandId: command.commandId, outcome: .succeeded)], at: clock.now)
            #expect(answer.commands.isEmpty)
            #expect(answer.ackResults.first?.status == .duplicate)
            #expect(try await state(client, command.commandId).state == .expired)
        }
    }

    /// A pending command past its expiry is expired before any sweep or sync marks it so: too
    /// late to cancel, and it stays expired (the one rule, `CommandExpiry`, applied by cancel too).
    @Test func aCommandPastItsExpiryCannotBeCancelled() async throws {
        let clock = TestClock()
        let fixture = try await Fixture.make(clock: clock)
        try await fixture.test { client in
            _ = try await client.register(user: "alice", device: "phone")
            let command = try await enqueue(client, EnqueueCommandRequest(
                type: .wipe, deviceId: "phone", expiresAt: clock.now.addingTimeInterval(600)))[0]
            clock.advance(by: 601)
            let refused = try await client.admin(.post, "/v1/admin/commands/\(command.commandId)/cancel")
            #expect(refused.status == .conflict)
            #expect(refused.errorCode == .conflict)
            let listed = try await client.admin(.get, "/v1/admin/devices/phone/commands").decode(CommandList.self)
            #expect(listed.commands.map(\.state) == [.expired])
        }
    }

    /// A quiet sync answers from the credential check's read of the open commands; one that has
    /// expired since it was delivered makes it take the store's path, which marks it expired.
    @Test func aQuietSyncLeavesOutADeliveredCommandPastItsExpiry() async throws {
        let clock = TestClock()
        let fixture = try await Fixture.make(clock: clock)
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice", device: "phone")
            let command = try await enqueue(client, EnqueueCommandRequest(
                type: .wipe, deviceId: "phone", expiresAt: clock.now.addingTimeInterval(600)))[0]
            #expect(try await sync(client, me, at: clock.now).commands.map(\.state) == [.delivered])
            // Delivered and not acknowledged: a quiet sync repeats it, from the first read.
            #expect(try await sync(client, me, at: clock.now).commands.map(\.commandId) == [command.commandId])
            clock.advance(by: 601)
            #expect(try await sync(client, me, at: clock.now).commands.isEmpty)
            let stored = try await state(client, command.commandId)
            #expect(stored.state == .expired && stored.completedAt == command.expiresAt)
        }
    }

    @Test func badCommandsAreRefusedAndChangeNothing() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice", device: "phone")
            let unknownDevice = try await client.admin(.post, "/v1/admin/commands", json: EnqueueCommandRequest(type: .wipe, deviceId: "ghost"))
            #expect(unknownDevice.status == .notFound)
            let unknownUser = try await client.admin(.post, "/v1/admin/commands", json: EnqueueCommandRequest(type: .wipe, userId: "nobody"))
            #expect(unknownUser.status == .notFound)

            let unknownType = try await client.admin(.post, "/v1/admin/commands", json: ["type": "selfDestruct", "deviceId": "phone"])
            #expect(unknownType.status == .badRequest)
            #expect(unknownType.errorCode == .badRequest)

            for bad in [
                EnqueueCommandRequest(type: .deleteAssets, deviceId: "phone"),
                EnqueueCommandRequest(type: .deleteAssets, deviceId: "phone", assetIds: []),
                EnqueueCommandRequest(type: .wipe, deviceId: "phone", assetIds: ["a"]),
                EnqueueCommandRequest(type: .wipe),
                EnqueueCommandRequest(type: .wipe, deviceId: "phone", userId: "alice"),
                EnqueueCommandRequest(type: .wipe, deviceId: "phone", expiresAt: Date().addingTimeInterval(-5)),
                EnqueueCommandRequest(type: .deleteAssets, deviceId: "phone", assetIds: (0...WireLimits.maxAssetIdsPerCommand).map { "a\($0)" }),
            ] {
                let response = try await client.admin(.post, "/v1/admin/commands", json: bad)
                #expect(response.status == .badRequest, "\(bad)")
                #expect(response.errorCode == .validationFailed, "\(bad)")
            }
            let tooManyAcks = (0...WireLimits.maxAcksPerSync).map { CommandAck(commandId: "c\($0)", outcome: .succeeded) }
            let acks = try await client.device(.post, "/v1/sync", json: SyncRequest(acks: tooManyAcks), as: me)
            #expect(acks.errorCode == .validationFailed)

            #expect(try await client.admin(.get, "/v1/admin/devices/phone/commands").decode(CommandList.self).commands.isEmpty)
            #expect(try await client.admin(.get, "/v1/admin/devices/ghost/commands").status == .notFound)
            #expect(try await client.admin(.get, "/v1/admin/commands/nope").status == .notFound)
        }
    }

    @Test func theChannelRouteNeedsAnUpgradeAndCredentials() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice", device: "phone")
            let plain = try await client.device(.get, "/v1/devices/phone/channel", as: me)
            #expect(plain.status == .badRequest)
            let unsigned = try await client.raw(.get, "/v1/devices/phone/channel")
            #expect(unsigned.status == .unauthorized)
            try await client.register(user: "alice", device: "tablet")
            let other = try await client.device(.get, "/v1/devices/tablet/channel", as: me)
            #expect(other.status == .forbidden)
        }
    }
}
