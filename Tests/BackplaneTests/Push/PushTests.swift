import Backplane
import Crypto
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// Push wake-ups through local APNs and FCM endpoints that check what the providers check.
@Suite struct PushTests {
    /// How long a test waits for a push: the whole suite shares two cores, so a push can take
    /// seconds here. How soon pushes arrive is measured in benchmarks/push (p99 under a second).
    static let patience: Double = 10

    @Test func aWipeOfADeviceWithNoChannelIsPushedOncePerProvider() async throws {
        let rig = try await PushRig.start()
        defer { Task { await rig.stop() } }
        let fixture = try await Fixture.make(push: rig.options)
        try await fixture.test(.live) { client in
            try await rig.configure(client)
            let iPhone = try await client.registerForPush(token: "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90", provider: .apns)
            // An Android device of an SDK that named no provider: its platform says FCM.
            let pixel = try await client.registerForPush(token: "fcm-token-pixel:APA91b", provider: nil, platform: "android")
            try await client.wipe(iPhone)
            try await client.wipe(pixel)
            #expect(await PushRig.eventually(within: Self.patience) { rig.apns.pushes.count == 1 && rig.google.messages.count == 1 })
            let push = try #require(rig.apns.pushes.first)
            #expect(push.token == "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90")
            #expect(push.topic == PushRig.topic && push.collapseId == "backplane-sync")
            #expect(push.payload == .object(["aps": .object(["content-available": .int(1)]), "backplane": .string("sync")]))
            let expiration = try #require(push.expiration.flatMap(Double.init))
            #expect(expiration > Date().timeIntervalSince1970 + 3600)
            let message = try #require(rig.google.messages.first)
            #expect(message.project == PushRig.projectId && message.token == "fcm-token-pixel:APA91b")
            #expect(message.data == ["backplane": "sync"] && message.androidPriority == "high")
            // One each, and no more later.
            try await Task.sleep(for: .milliseconds(500))
            #expect(rig.apns.pushes.count == 1 && rig.google.messages.count == 1)
            #expect(rig.google.grantsIssued == 1)
            let metrics = try await client.raw(.get, "/metrics").text
            #expect(metrics.contains(#"backplane_pushes_total{provider="apns",outcome="delivered"} 1"#), "\(metrics)")
            #expect(metrics.contains(#"backplane_pushes_total{provider="fcm",outcome="delivered"} 1"#))
            #expect(metrics.contains("backplane_push_duration_seconds_count{provider=\"apns\"} 1"))
        }
    }

    @Test func aDeviceWithAnOpenChannelIsNotPushed() async throws {
        let rig = try await PushRig.start()
        defer { Task { await rig.stop() } }
        let fixture = try await Fixture.make(push: rig.options)
        try await fixture.test(.live) { client in
            try await rig.configure(client)
            let online = try await client.registerForPush(token: "00aa11bb22cc", provider: .apns)
            let offline = try await client.registerForPush(token: "33dd44ee55ff", provider: .apns)
            let channel = try await RealPort.openChannel(fixture, port: try #require(client.raw.port), as: online)
            defer { channel.disconnect() }
            try await client.wipe(online)
            try await client.wipe(offline)
            #expect(await PushRig.eventually(within: Self.patience) { rig.apns.pushes.count == 1 })
            try await Task.sleep(for: .milliseconds(500))
            #expect(rig.apns.pushes.map(\.token) == ["33dd44ee55ff"])
        }
    }

    @Test func commandsWithinTheSpacingRideOnePushAndAWaitingOneIsPushedWhenItEnds() async throws {
        let rig = try await PushRig.start(spacing: .seconds(8))
        defer { Task { await rig.stop() } }
        // The spacing is judged on the backplane's clock, which only the test moves: however slow
        // the first push, the later commands fall inside it.
        let clock = TestClock()
        let fixture = try await Fixture.make(clock: clock, push: rig.options)
        try await fixture.test(.live) { client in
            try await rig.configure(client)
            let device = try await client.registerForPush(token: "fcm-coalesced", provider: .fcm, platform: "android")
            let firstEnqueued = ContinuousClock.now
            try await client.wipe(device)
            #expect(await PushRig.eventually(within: Self.patience) { rig.google.messages.count == 1 })
            // Two more commands inside the spacing: no push of their own.
            try await client.wipe(device)
            try await client.wipe(device)
            try await Task.sleep(for: .milliseconds(800))
            #expect(rig.google.messages.count == 1, "commands inside the spacing ride the first push")
            // The look again comes after 8 s, but the spacing has not ended on the backplane's
            // clock: nothing more, however late the later commands' claims were made.
            try await Task.sleep(until: firstEnqueued + .seconds(9), clock: .continuous)
            #expect(rig.google.messages.count == 1, "pushed again inside the spacing")
            // The device never synced, so its commands still wait: pushed once more when the
            // spacing ends, at the next look again.
            clock.advance(by: 8)
            #expect(await PushRig.eventually(within: Self.patience + 8) { rig.google.messages.count == 2 })
            // The spacing runs from the first push's claim, which came after the first command.
            #expect(rig.google.messages[1].receivedAt - firstEnqueued >= .seconds(8))
            try await Task.sleep(for: .milliseconds(800))
            #expect(rig.google.messages.count == 2)
        }
    }

    @Test func aDeviceThatSyncedItsCommandsIsNotPushedWhenTheSpacingEnds() async throws {
        // Long enough that the first push lands, and the device syncs, well inside it.
        let spacing: Duration = .seconds(8)
        let rig = try await PushRig.start(spacing: spacing)
        defer { Task { await rig.stop() } }
        // Both commands inside the spacing however slow the machine: its clock is the test's.
        let clock = TestClock()
        let fixture = try await Fixture.make(clock: clock, push: rig.options)
        try await fixture.test(.live) { client in
            try await rig.configure(client)
            let device = try await client.registerForPush(token: "apns-synced", provider: .apns)
            let firstEnqueued = ContinuousClock.now
            try await client.wipe(device)
            try await client.wipe(device)
            #expect(await PushRig.eventually(within: Self.patience) { rig.apns.pushes.count == 1 })
            // Woken by the push, the device syncs and receives both commands: nothing waits when
            // the spacing ends, so the second command's look again pushes nothing.
            let sync = try await client.device(.post, "/v1/sync", json: SyncRequest(), as: device)
            #expect(sync.status == .ok, "\(sync.text)")
            #expect(try sync.decode(SyncResponse.self).commands.count == 2)
            clock.advance(by: 8)
            try await Task.sleep(until: firstEnqueued + spacing + .seconds(1), clock: .continuous)
            #expect(rig.apns.pushes.count == 1)
        }
    }

    @Test func tokensTheProvidersCallDeadAreDropped() async throws {
        let rig = try await PushRig.start()
        defer { Task { await rig.stop() } }
        rig.apns.behave { $0.unregistered = ["dead-apns-410"]; $0.badTokens = ["bad-apns-400"] }
        rig.google.behave { $0.unregistered = ["dead-fcm-404"]; $0.invalidTokens = ["bad-fcm-400"]; $0.otherProjectTokens = ["other-fcm-403"] }
        let fixture = try await Fixture.make(push: rig.options)
        try await fixture.test(.live) { client in
            try await rig.configure(client)
            var devices: [DeviceIdentity] = []
            let dead = [("dead-apns-410", PushProvider.apns), ("bad-apns-400", .apns), ("dead-fcm-404", .fcm), ("bad-fcm-400", .fcm), ("other-fcm-403", .fcm)]
            for (token, provider) in dead {
                let device = try await client.registerForPush(token: token, provider: provider)
                devices.append(device)
                try await client.wipe(device)
            }
            for device in devices {
                var dropped = false
                for _ in 0..<100 where !dropped {
                    dropped = try await client.adminDevice(device).pushToken == nil
                    if !dropped { try await Task.sleep(for: .milliseconds(20)) }
                }
                #expect(dropped, "the token of \(device.deviceId) is still there")
                #expect(try await client.adminDevice(device).pushProvider == nil)
            }
            let metrics = try await client.raw(.get, "/metrics").text
            #expect(metrics.contains(#"backplane_push_tokens_dropped_total{provider="apns"} 2"#), "\(metrics)")
            #expect(metrics.contains(#"backplane_push_tokens_dropped_total{provider="fcm"} 3"#))
            #expect(rig.apns.pushes.isEmpty && rig.google.messages.isEmpty)
            // A token of another Firebase project is that device's problem: the credentials stand.
            let configuration = try await client.admin(.get, "/v1/admin/push").decode(PushConfigurationResponse.self)
            #expect(configuration.fcm?.broken == nil && configuration.apns?.broken == nil)
        }
    }

    @Test func tooManyRequestsAreRetriedWithBackoff() async throws {
        let rig = try await PushRig.start()
        defer { Task { await rig.stop() } }
        rig.apns.behave { $0.tooManyRequests = 2 }
        rig.google.behave { $0.quotaExceeded = 2 }
        let fixture = try await Fixture.make(push: rig.options)
        try await fixture.test(.live) { client in
            try await rig.configure(client)
            try await client.wipe(try await client.registerForPush(token: "apns-busy", provider: .apns))
            try await client.wipe(try await client.registerForPush(token: "fcm-busy", provider: .fcm))
            #expect(await PushRig.eventually(within: Self.patience) { rig.apns.pushes.count == 1 && rig.google.messages.count == 1 })
            #expect(rig.apns.refusals.map(\.status) == [429, 429])
            let metrics = try await client.raw(.get, "/metrics").text
            #expect(metrics.contains(#"backplane_push_retries_total{provider="apns"} 2"#), "\(metrics)")
            #expect(metrics.contains(#"backplane_push_retries_total{provider="fcm"} 2"#))
        }
    }

    @Test func aProviderThatRefusesTheCredentialsMarksThemBrokenWithoutTryingEveryDevice() async throws {
        let rig = try await PushRig.start()
        defer { Task { await rig.stop() } }
        rig.google.behave { $0.refuseGrants = true }
        let fixture = try await Fixture.make(push: rig.options)
        try await fixture.test(.live) { client in
            // A key Apple does not know for this team.
            var wrongKey = rig.apnsCredentials
            wrongKey.privateKey = P256.Signing.PrivateKey().pemRepresentation
            #expect(try await client.admin(.put, "/v1/admin/push/apns", json: wrongKey).status == .ok)
            #expect(try await client.admin(.put, "/v1/admin/push/fcm", json: FCMCredentialsUpdate(serviceAccount: rig.serviceAccount)).status == .ok)
            try await client.wipe(try await client.registerForPush(token: "apns-1", provider: .apns))
            try await client.wipe(try await client.registerForPush(token: "fcm-1", provider: .fcm))
            var configuration = PushConfigurationResponse(applicationId: "")
            for _ in 0..<100 {
                configuration = try await client.admin(.get, "/v1/admin/push").decode(PushConfigurationResponse.self)
                if configuration.apns?.broken != nil, configuration.fcm?.broken != nil { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(configuration.apns?.broken?.reason == "InvalidProviderToken")
            #expect(configuration.fcm?.broken?.reason.hasPrefix("invalid_grant") == true, "\(String(describing: configuration.fcm))")
            // Other devices are not tried against credentials known to be refused.
            try await client.wipe(try await client.registerForPush(token: "apns-2", provider: .apns))
            try await Task.sleep(for: .milliseconds(600))
            // The first device was tried twice (a new provider token, once); the second not at all.
            #expect(rig.apns.refusals.count == 2)
            let metrics = try await client.raw(.get, "/metrics").text
            #expect(metrics.contains(#"backplane_push_credentials_broken_total{provider="apns"} 1"#), "\(metrics)")
            #expect(metrics.contains(#"backplane_pushes_total{provider="apns",outcome="credentials_broken"} 2"#))
            // Setting them again (fixed) clears the mark, and pushes go out.
            #expect(try await client.admin(.put, "/v1/admin/push/apns", json: rig.apnsCredentials).status == .ok)
            let fixed = try await client.admin(.get, "/v1/admin/push/apns").decode(APNsConfiguration.self)
            #expect(fixed.broken == nil)
            try await client.wipe(try await client.registerForPush(token: "apns-3", provider: .apns))
            #expect(
                await PushRig.eventually(within: Self.patience) { rig.apns.pushes.map(\.token) == ["apns-3"] },
                "pushes \(rig.apns.pushes.map(\.token)), refusals \(rig.apns.refusals)")
        }
    }

    @Test func aBurstSharesOneConnectionOneProviderTokenAndOneAccessToken() async throws {
        let rig = try await PushRig.start()
        defer { Task { await rig.stop() } }
        let fixture = try await Fixture.make(push: rig.options)
        try await fixture.test(.live) { client in
            try await rig.configure(client)
            for index in 0..<20 {
                try await client.registerForPush(user: "household", token: "apns-\(index)", provider: .apns)
                try await client.registerForPush(user: "household", token: "fcm-\(index)", provider: .fcm, platform: "android")
            }
            // One command for every device of the user: forty pushes at once.
            let wipe = try await client.admin(.post, "/v1/admin/commands", json: EnqueueCommandRequest(type: .wipe, userId: "household"))
            #expect(wipe.status == .created, "\(wipe.text)")
            #expect(await PushRig.eventually(within: Self.patience) { rig.apns.pushes.count == 20 && rig.google.messages.count == 20 })
            #expect(rig.apns.server.connectionsAccepted == 1 && Set(rig.apns.pushes.map(\.connection)).count == 1)
            #expect(Set(rig.apns.pushes.map(\.issuedAt)).count == 1, "one provider token signed for the burst")
            #expect(rig.google.grantsIssued == 1, "one access token asked for the burst")
            #expect(rig.apns.refusals.isEmpty)
        }
    }

    @Test func credentialsAreCheckedWholeAndTheirSecretsNeverShownBack() async throws {
        let rig = try await PushRig.start()
        defer { Task { await rig.stop() } }
        let fixture = try await Fixture.make(push: rig.options)
        try await fixture.test { client in
            #expect(try await client.admin(.get, "/v1/admin/push/apns").status == .notFound)
            var broken = rig.apnsCredentials
            broken.privateKey = "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----"
            let refused = try await client.admin(.put, "/v1/admin/push/apns", json: broken)
            #expect(refused.status == .badRequest && refused.errorCode == .validationFailed, "\(refused.text)")
            var badTopic = rig.apnsCredentials
            badTopic.topic = "com.example/../x"
            #expect(try await client.admin(.put, "/v1/admin/push/apns", json: badTopic).status == .badRequest)
            var account = rig.serviceAccount
            if case .object(var fields) = account { fields["private_key"] = .string("nope"); account = .object(fields) }
            #expect(try await client.admin(.put, "/v1/admin/push/fcm", json: FCMCredentialsUpdate(serviceAccount: account)).status == .badRequest)
            #expect(try await client.admin(.put, "/v1/admin/push/fcm", json: FCMCredentialsUpdate(serviceAccount: .string("x"))).status == .badRequest)
            // Nothing was stored by the refusals.
            #expect(try await client.admin(.get, "/v1/admin/push").decode(PushConfigurationResponse.self).apns == nil)

            let set = try await client.admin(.put, "/v1/admin/push/apns", json: rig.apnsCredentials)
            #expect(set.status == .ok)
            let fcm = try await client.admin(.put, "/v1/admin/push/fcm", json: FCMCredentialsUpdate(serviceAccount: rig.serviceAccount))
            for answer in [set.text, fcm.text, try await client.admin(.get, "/v1/admin/push").text] {
                #expect(!answer.contains("PRIVATE KEY") && !answer.contains("private_key") && !answer.contains(PushRig.clientEmail), "\(answer)")
            }
            let shown = try fcm.decode(PushConfigurationResponse.self)
            #expect(shown.apns?.teamId == PushRig.teamId && shown.apns?.keyId == PushRig.keyId && shown.apns?.topic == PushRig.topic)
            #expect(shown.apns?.environment == .production && shown.fcm?.projectId == PushRig.projectId)
            #expect(try await client.admin(.delete, "/v1/admin/push/apns").status == .noContent)
            #expect(try await client.admin(.delete, "/v1/admin/push/apns").status == .notFound)
            #expect(try await client.admin(.get, "/v1/admin/push").decode(PushConfigurationResponse.self).apns == nil)
        }
    }

    @Test func providerTokensAreKeptAndRenewedBeforeTheProvidersRefuseThem() async throws {
        let clock = TestClock()
        let rig = try await PushRig.start(now: { clock.now })
        defer { Task { await rig.stop() } }
        let fixture = try await Fixture.make(clock: clock, push: rig.options)
        try await fixture.test(.live) { client in
            try await rig.configure(client)
            var devices: [(apns: DeviceIdentity, fcm: DeviceIdentity)] = []
            for index in 0..<3 {
                devices.append((
                    try await client.registerForPush(token: "apns-\(index)", provider: .apns, at: clock.now),
                    try await client.registerForPush(token: "fcm-\(index)", provider: .fcm, at: clock.now)))
            }
            func push(_ index: Int) async throws {
                try await client.wipe(devices[index].apns)
                try await client.wipe(devices[index].fcm)
                let expected = index + 1
                #expect(await PushRig.eventually(within: Self.patience) { rig.apns.pushes.count == expected && rig.google.messages.count == expected })
            }
            try await push(0)
            try await push(1)
            // The second push reused the first's provider token and access token.
            #expect(rig.apns.pushes[1].issuedAt == rig.apns.pushes[0].issuedAt)
            #expect(rig.google.grantsIssued == 1)
            // 56 minutes on: Apple refuses a token an hour old, so it was renewed (after 50); the
            // access token (an hour, less five minutes' margin) too.
            clock.advance(by: 56 * 60)
            try await push(2)
            #expect(rig.apns.pushes[2].issuedAt.timeIntervalSince(rig.apns.pushes[0].issuedAt) >= 56 * 60 - 1)
            #expect(rig.apns.refusals.isEmpty, "\(rig.apns.refusals)")
            #expect(rig.google.grantsIssued == 2)
        }
    }
}
