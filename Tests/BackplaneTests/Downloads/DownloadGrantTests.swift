import Backplane
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import BackplaneWire
import Testing

/// Download permissions: the rules and their counts, what ends a grant, and the entitlements.
@Suite struct DownloadGrantTests {
    private func ask(_ client: Client, _ assetId: String, as identity: DeviceIdentity, maxLifetime: Int? = nil) async throws -> TestResponse {
        try await client.device(
            .post, "/v1/download-grants", json: DownloadPermissionRequest(assetId: assetId, maxLifetimeDownloads: maxLifetime), as: identity)
    }

    private func grant(_ client: Client, _ assetId: String, as identity: DeviceIdentity) async throws -> DownloadPermissionResponse {
        let response = try await ask(client, assetId, as: identity)
        #expect(response.status == .created, "\(assetId): \(response.text)")
        return try response.decode(DownloadPermissionResponse.self)
    }

    /// The denial's rule and its counts, or nil with an issue when the answer is not a denial.
    private func denial(_ response: TestResponse) throws -> (rule: String, counts: [String: JSONValue])? {
        guard response.status == .conflict, response.errorCode == .downloadLimitReached,
              case .string(let rule) = response.errorDetails?["rule"], case .object(let counts) = response.errorDetails?["counts"]
        else {
            Issue.record("not a download limit denial: \(response.status) \(response.text)")
            return nil
        }
        return (rule, counts)
    }

    private func report(_ client: Client, _ reports: [DownloadReport], as identity: DeviceIdentity) async throws -> [DownloadReportResult] {
        let response = try await client.device(.post, "/v1/sync", json: SyncRequest(downloadReports: reports), as: identity)
        #expect(response.status == .ok, "\(response.text)")
        return try response.decode(SyncResponse.self).downloadReportResults
    }

    @Test func eachRuleDeniesAtItsLimitWithTheCounts() async throws {
        let fixture = try await Fixture.make()
        _ = try await fixture.services.applications.updateSettings(applicationId: fixture.applicationId, ApplicationSettingsUpdate { $0.maxDownloadsPerDevice = 2; $0.maxDownloadsPerAccount = 3; $0.maxLifetimeDownloadsPerAsset = 2; $0.maxCopiesPerAccount = 1 })
        try await fixture.test { client in
            let phone = try await client.register(user: "ann", device: "phone").0
            let tablet = try await client.register(user: "ann", device: "tablet").0

            let a = try await grant(client, "a", as: phone)
            #expect(a.grant.state == .active && a.grant.assetId == "a" && a.grant.deviceId == "phone" && a.grant.userId == "ann")
            #expect(a.counts == DownloadCounts(
                assetLifetime: .init(used: 1, limit: 2), account: .init(used: 1, limit: 3), copies: .init(used: 1, limit: 1),
                device: .init(used: 1, limit: 2)))
            // Asking again is answered with the same grant, counted once.
            let again = try await ask(client, "a", as: phone)
            #expect(again.status == .ok)
            #expect(try again.decode(DownloadPermissionResponse.self).grant.grantId == a.grant.grantId)

            // Copies: the tablet may not hold a second copy of a.
            let copies = try denial(try await ask(client, "a", as: tablet))
            #expect(copies?.rule == "copies")
            #expect(copies?.counts["copies"] == .object(["used": .int(1), "limit": .int(1)]))
            // Device: the phone holds two.
            _ = try await grant(client, "b", as: phone)
            let device = try denial(try await ask(client, "c", as: phone))
            #expect(device?.rule == "device")
            #expect(device?.counts["device"] == .object(["used": .int(2), "limit": .int(2)]))
            // Account: three across both devices.
            let c = try await grant(client, "c", as: tablet)
            let account = try denial(try await ask(client, "d", as: tablet))
            #expect(account?.rule == "account")
            #expect(account?.counts["account"] == .object(["used": .int(3), "limit": .int(3)]))

            // A completed then deleted download frees its copy and its place, not its lifetime count.
            #expect(try await report(client, [.init(grantId: a.grant.grantId, outcome: .completed)], as: phone).map(\.status) == [.accepted])
            #expect(try await report(client, [.init(grantId: a.grant.grantId, outcome: .deleted)], as: phone).map(\.status) == [.accepted])
            let second = try await grant(client, "a", as: tablet)
            #expect(second.counts.assetLifetime == .init(used: 2, limit: 2))
            #expect(try await report(client, [.init(grantId: second.grant.grantId, outcome: .deleted)], as: tablet).map(\.status) == [.accepted])
            let lifetime = try await ask(client, "a", as: phone)
            #expect(try denial(lifetime)?.rule == "assetLifetime")
            #expect(lifetime.errorDetails?["permanent"] == .bool(true))

            // Only an admin frees the lifetime count.
            let reset = try await client.admin(.post, "/v1/admin/download-grants/reset-lifetime", json: LifetimeResetRequest(userId: "ann", assetId: "a"))
            #expect(try reset.decode(LifetimeResetResponse.self).resetGrants == 2)
            #expect(try await grant(client, "a", as: phone).counts.assetLifetime == .init(used: 1, limit: 2))

            // A failed download frees its place but stays in the lifetime count (else "ask,
            // report failed, ask" would get round it); the asset's own limit only tightens.
            #expect(try await report(client, [.init(grantId: c.grant.grantId, outcome: .deleted)], as: tablet).map(\.status) == [.accepted])
            let failing = try await grant(client, "e", as: tablet)
            #expect(try await report(client, [.init(grantId: failing.grant.grantId, outcome: .failed)], as: tablet).map(\.status) == [.accepted])
            let retried = try await grant(client, "e", as: tablet)
            #expect(retried.counts.assetLifetime == .init(used: 2, limit: 2))
            #expect(retried.counts.device == .init(used: 1, limit: 2))
            let tightened = try denial(try await ask(client, "f", as: tablet, maxLifetime: 0))
            #expect(tightened?.rule == "assetLifetime")
            #expect(tightened?.counts["assetLifetime"] == .object(["used": .int(0), "limit": .int(0)]))
        }
    }

    @Test func aDeviceNotDownloadEnabledIsRefused() async throws {
        let fixture = try await Fixture.make(deviceLimit: 1)
        try await fixture.test { client in
            _ = try await client.register(user: "bo", device: "phone")
            let (tablet, registered) = try await client.register(user: "bo", device: "tablet")
            #expect(!registered.device.downloadEnabled)
            let refused = try await ask(client, "a", as: tablet)
            #expect(refused.status == .conflict)
            #expect(refused.errorCode == .downloadNotEnabled)
            let grants = try await client.admin(.get, "/v1/admin/download-grants?userId=bo").decode(DownloadGrantPage.self)
            #expect(grants.grants.isEmpty)
        }
    }

    @Test func reportsMoveAGrantOnceAndOnlyForItsDevice() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let phone = try await client.register(user: "cy", device: "phone").0
            let tablet = try await client.register(user: "cy", device: "tablet").0
            let granted = try await grant(client, "a", as: phone).grant
            let results = try await report(client, [
                .init(grantId: granted.grantId, outcome: .completed),
                .init(grantId: granted.grantId, outcome: .completed),
                .init(grantId: granted.grantId, outcome: .failed),
                .init(grantId: "gr_unknown", outcome: .deleted),
            ], as: phone)
            #expect(results.map(\.status) == [.accepted, .duplicate, .rejected, .rejected])
            #expect(results[0].state == .completed)
            // Forward only: nothing comes back from failed or deleted.
            let failed = try await grant(client, "b", as: phone).grant
            #expect(try await report(client, [.init(grantId: failed.grantId, outcome: .failed), .init(grantId: failed.grantId, outcome: .completed)], as: phone)
                .map(\.status) == [.accepted, .rejected])
            let deleted = try await grant(client, "c", as: phone).grant
            #expect(try await report(client, [.init(grantId: deleted.grantId, outcome: .deleted), .init(grantId: deleted.grantId, outcome: .completed)], as: phone)
                .map(\.status) == [.accepted, .rejected])
            // An ended grant is listed without an entitlement.
            let ended = try await client.admin(.get, "/v1/admin/download-grants?deviceId=phone").decode(DownloadGrantPage.self)
            #expect(ended.grants.map(\.state) == [.deleted, .failed, .completed])
            #expect(ended.grants.map { $0.entitlement != nil } == [false, false, true])
            // Another device cannot end it.
            #expect(try await report(client, [.init(grantId: granted.grantId, outcome: .deleted)], as: tablet).map(\.status) == [.rejected])
        }
    }

    @Test func wipeKillAndUnregisterReleaseTheDevicesGrants() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            var devices: [String: DeviceIdentity] = [:]
            for name in ["wiped", "pruned", "killed", "unregistered", "moved"] {
                let identity = try await client.register(user: "di", device: name).0
                devices[name] = identity
                _ = try await grant(client, "x-\(name)", as: identity)
                _ = try await grant(client, "y-\(name)", as: identity)
            }
            func states(_ device: String) async throws -> [String: DownloadGrantState] {
                let page = try await client.admin(.get, "/v1/admin/download-grants?deviceId=\(device)").decode(DownloadGrantPage.self)
                return Dictionary(uniqueKeysWithValues: page.grants.map { ($0.assetId, $0.state) })
            }
            func runCommand(_ request: EnqueueCommandRequest, on device: String) async throws {
                let enqueued = try await client.admin(.post, "/v1/admin/commands", json: request).decode(CommandList.self)
                let ack = CommandAck(commandId: try #require(enqueued.commands.first).commandId, outcome: .succeeded)
                let synced = try await client.device(.post, "/v1/sync", json: SyncRequest(acks: [ack]), as: try #require(devices[device]))
                #expect(try synced.decode(SyncResponse.self).ackResults.map(\.status) == [.accepted])
            }
            try await runCommand(EnqueueCommandRequest(type: .wipe, deviceId: "wiped"), on: "wiped")
            #expect(try await states("wiped") == ["x-wiped": .released, "y-wiped": .released])
            try await runCommand(EnqueueCommandRequest(type: .deleteAssets, deviceId: "pruned", assetIds: ["x-pruned"]), on: "pruned")
            #expect(try await states("pruned") == ["x-pruned": .released, "y-pruned": .active])
            try await runCommand(EnqueueCommandRequest(type: .kill, deviceId: "killed"), on: "killed")
            #expect(try await states("killed") == ["x-killed": .released, "y-killed": .released])
            _ = try await client.admin(.post, "/v1/admin/devices/unregistered/unregister")
            #expect(try await states("unregistered") == ["x-unregistered": .released, "y-unregistered": .released])
            // A device moved to another user holds none of the old user's downloads.
            _ = try await client.register(user: "other", device: "moved", move: true)
            #expect(try await states("moved") == ["x-moved": .released, "y-moved": .released])
        }
    }

    @Test func aRevokedGrantIsDeletedOnTheDeviceAndReleasedWhenAcknowledged() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let phone = try await client.register(user: "hu", device: "phone").0
            let granted = try await grant(client, "film", as: phone).grant
            func state() async throws -> DownloadGrantState? {
                try await client.admin(.get, "/v1/admin/download-grants?deviceId=phone").decode(DownloadGrantPage.self).grants.first?.state
            }
            let revoked = try await client.admin(.post, "/v1/admin/download-grants/\(granted.grantId)/revoke")
            #expect(revoked.status == .ok, "\(revoked.text)")
            let command = try revoked.decode(RevokedGrant.self).command
            #expect(command.type == .deleteAssets && command.assetIds == ["film"] && command.deviceId == "phone")

            // The device finds the deletion at its next sync; the grant holds until it is done.
            let synced = try await client.device(.post, "/v1/sync", as: phone).decode(SyncResponse.self)
            #expect(synced.commands.map(\.commandId) == [command.commandId])
            #expect(try await state() == .active)
            let acked = try await client.device(
                .post, "/v1/sync", json: SyncRequest(acks: [CommandAck(commandId: command.commandId, outcome: .succeeded)]), as: phone)
            #expect(try acked.decode(SyncResponse.self).ackResults.map(\.status) == [.accepted])
            #expect(try await state() == .released)

            #expect(try await client.admin(.post, "/v1/admin/download-grants/\(granted.grantId)/revoke").status == .conflict)
            #expect(try await client.admin(.post, "/v1/admin/download-grants/gr_unknown/revoke").status == .notFound)
        }
    }

    /// 200 requests at once for different assets, from one device with room for 7: exactly 7 granted.
    /// Over HTTP, 8 requests for room for 3: one per pooled connection of async-http-client,
    /// whose 15 s deadline also covers the wait for a connection. 24 requests (three turns of the
    /// pool) and even 12 ran out of it on a loaded machine.
    @Test(arguments: [(TestingSetup.router, 200, 7), (.ahc(.http), 8, 3)])
    func concurrentRequestsNeverExceedALimit(setup: TestingSetup, requests: Int, room: Int) async throws {
        let fixture = try await Fixture.make()
        _ = try await fixture.services.applications.updateSettings(applicationId: fixture.applicationId, ApplicationSettingsUpdate { $0.maxDownloadsPerDevice = room })
        try await fixture.test(setup) { client in
            let phone = try await client.register(user: "ed", device: "phone").0
            let answers = try await withThrowingTaskGroup(of: TestResponse.self) { group in
                for index in 0..<requests {
                    group.addTask { try await ask(client, "asset-\(index)", as: phone) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let granted = answers.filter { $0.status == .created }
            let denied = answers.filter { $0.errorCode == .downloadLimitReached }
            #expect(granted.count == room)
            #expect(denied.count == requests - room)
            let other = answers.filter { $0.status != .created && $0.errorCode != .downloadLimitReached }
            #expect(other.isEmpty, "neither granted nor denied: \(other.map { "\($0.status) \($0.text)" })")
            let page = try await client.admin(.get, "/v1/admin/download-grants?deviceId=phone&limit=500").decode(DownloadGrantPage.self)
            #expect(page.grants.count == room)
        }
    }

    @Test func entitlementsVerifyWithThePublishedKeysAcrossARotation() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let phone = try await client.register(user: "fay", device: "phone").0
            // Before the first grant there is no key, and reading the keys creates none.
            let empty = try await client.raw(.get, "/v1/applications/\(fixture.applicationId)/entitlement-keys")
            #expect(try empty.decode(EntitlementKeySet.self).keys.isEmpty)
            let first = try await grant(client, "movie", as: phone).grant
            let firstToken = try #require(first.entitlement)
            // A license server knows only the published keys.
            func publishedKeys() async throws -> JWTKeyCollection {
                let response = try await client.raw(.get, "/v1/applications/\(fixture.applicationId)/entitlement-keys")
                #expect(response.status == .ok)
                #expect(try response.decode(EntitlementKeySet.self).keys.isEmpty == false)
                return try await JWTKeyCollection().add(jwksJSON: response.text)
            }
            let claims = try await publishedKeys().verify(firstToken, as: EntitlementClaims.self)
            #expect(claims.iss == "backplane" && claims.aud == fixture.applicationId && claims.sub == "fay" && claims.jti == first.grantId)
            #expect(claims.deviceId == "phone" && claims.assetId == "movie" && claims.window == first.window)
            #expect(claims.exp - claims.iat == Int64(Entitlements.lifetime))

            // A changed claim does not verify.
            let parts = firstToken.split(separator: ".").map(String.init)
            var forged = claims
            forged.deviceId = "tablet"
            let forgedToken = [parts[0], Base64URL.encode(try JSONEncoder().encode(forged)), parts[2]].joined(separator: ".")
            let keys = try await publishedKeys()
            await #expect(throws: JWTError.self) { _ = try await keys.verify(forgedToken, as: EntitlementClaims.self) }
            // Nor does an expired one, whoever signed it.
            let anyKey = JWTKeyCollection()
            await anyKey.add(eddsa: try EdDSA.PrivateKey(), kid: "test")
            var expired = claims
            expired.exp = Int64(Date().timeIntervalSince1970) - 60
            let expiredToken = try await anyKey.sign(expired, kid: "test")
            await #expect(throws: JWTError.self) { _ = try await anyKey.verify(expiredToken, as: EntitlementClaims.self) }

            // Rotation: the new key signs, the old one still verifies until it is retired.
            let rotated = try await client.admin(.post, "/v1/admin/entitlement-keys")
            #expect(rotated.status == .created)
            let keySet = try rotated.decode(EntitlementKeySet.self)
            #expect(keySet.keys.count == 2)
            let secondToken = try #require(try await grant(client, "series", as: phone).grant.entitlement)
            let header = try JSONDecoder().decode([String: String].self, from: try #require(Base64URL.decode(String(secondToken.split(separator: ".")[0]))))
            #expect(header["kid"] == keySet.keys[0].kid)
            #expect(try await publishedKeys().verify(firstToken, as: EntitlementClaims.self).jti == first.grantId)
            #expect(try await publishedKeys().verify(secondToken, as: EntitlementClaims.self).assetId == "series")

            let signing = try await client.admin(.post, "/v1/admin/entitlement-keys/\(keySet.keys[0].kid)/retire")
            #expect(signing.status == .conflict)
            let retired = try await client.admin(.post, "/v1/admin/entitlement-keys/\(keySet.keys[1].kid)/retire")
            #expect(try retired.decode(EntitlementKeySet.self).keys.map(\.kid) == [keySet.keys[0].kid])
            let remaining = try await publishedKeys()
            await #expect(throws: JWTError.self) { _ = try await remaining.verify(firstToken, as: EntitlementClaims.self) }
        }
    }

    @Test func badPermissionInputIsRefusedAndGrantsNothing() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let phone = try await client.register(user: "gus", device: "phone").0
            for (request, field) in [
                (DownloadPermissionRequest(assetId: ""), "assetId"),
                (DownloadPermissionRequest(assetId: String(repeating: "x", count: 129)), "assetId"),
                (DownloadPermissionRequest(assetId: "a", maxLifetimeDownloads: -1), "maxLifetimeDownloads"),
                (DownloadPermissionRequest(assetId: "a", maxLifetimeDownloads: 2_000_000), "maxLifetimeDownloads"),
            ] {
                let response = try await client.device(.post, "/v1/download-grants", json: request, as: phone)
                #expect(response.status == .badRequest)
                #expect(response.errorDetails?["field"] == .string(field))
            }
            let tooMany = try await client.device(
                .post, "/v1/sync", json: SyncRequest(downloadReports: Array(repeating: .init(grantId: "gr_x", outcome: .deleted), count: 501)),
                as: phone)
            #expect(tooMany.status == .badRequest)
            #expect(try await client.raw(.get, "/v1/applications/app_unknown/entitlement-keys").status == .notFound)
            #expect(try await client.admin(.get, "/v1/admin/download-grants?cursor=nonsense").status == .badRequest)
            #expect(try await client.admin(.post, "/v1/admin/download-grants/reset-lifetime", json: LifetimeResetRequest(userId: "", assetId: "a")).status == .badRequest)
            // An asset the user was never granted.
            #expect(try await client.admin(.post, "/v1/admin/download-grants/reset-lifetime", json: LifetimeResetRequest(userId: "gus", assetId: "unknown")).status == .notFound)
            // The app key alone (no device) may not ask.
            #expect(try await client.device(.post, "/v1/download-grants", json: DownloadPermissionRequest(assetId: "a")).status == .unauthorized)
            let grants = try await client.admin(.get, "/v1/admin/download-grants").decode(DownloadGrantPage.self)
            #expect(grants.grants.isEmpty)
        }
    }
}
