import Backplane
import Crypto
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// The push forms of the console's settings page: what the admin API does, never a key shown.
@Suite struct PushConsoleTests {
    @Test func theSettingsPageSetsShowsAndRemovesPushCredentials() async throws {
        let rig = try await PushRig.start()
        defer { Task { await rig.stop() } }
        let fixture = try await Fixture.make(push: rig.options)
        try await fixture.test { client in
            var browser = try #require(try await ConsoleBrowser.signIn(client, token: fixture.adminToken))
            let empty = try await browser.get("/console/settings")
            #expect(empty.text.contains("Not set: Apple devices are not pushed."))
            let fields = [
                "teamId": PushRig.teamId, "keyId": PushRig.keyId, "topic": PushRig.topic, "environment": "sandbox",
                "privateKey": "not a key",
            ]
            let refused = try await browser.post("/console/settings/push/apns", fields)
            #expect(refused.status == .badRequest)
            #expect(refused.text.contains("APNs credentials were not saved") && refused.text.contains("value=\"\(PushRig.keyId)\""))
            #expect(try await client.admin(.get, "/v1/admin/push").decode(PushConfigurationResponse.self).apns == nil)

            var good = fields
            good["privateKey"] = rig.apnsCredentials.privateKey
            let saved = try await browser.post("/console/settings/push/apns", good)
            #expect(saved.status == .ok && saved.text.contains("APNs credentials saved"), "\(saved.text)")
            #expect(saved.text.contains("team \(PushRig.teamId), key \(PushRig.keyId), topic \(PushRig.topic) (sandbox)"))
            let account = String(decoding: try JSONEncoder().encode(rig.serviceAccount), as: UTF8.self)
            let fcm = try await browser.post("/console/settings/push/fcm", ["serviceAccount": account])
            #expect(fcm.text.contains("FCM credentials saved") && fcm.text.contains("project \(PushRig.projectId)"))
            #expect(!fcm.text.contains("PRIVATE KEY") && !fcm.text.contains(PushRig.clientEmail))
            let stored = try await client.admin(.get, "/v1/admin/push").decode(PushConfigurationResponse.self)
            #expect(stored.apns?.environment == .sandbox && stored.fcm?.projectId == PushRig.projectId)

            // Credentials a provider refused are shown as such, with its reason.
            let record = try #require(try await fixture.services.store.pushCredentials(applicationId: fixture.applicationId).first { $0.provider == .fcm })
            #expect(try await fixture.services.store.markPushCredentialsBroken(
                applicationId: fixture.applicationId, provider: .fcm, setAt: record.setAt, broken: PushCredentialsBroken(since: Date(), reason: "invalid_grant")))
            let broken = try await browser.get("/console/settings")
            #expect(broken.text.contains("Refused by the provider since") && broken.text.contains("invalid_grant"))

            let removed = try await browser.post("/console/settings/push/apns/delete", [:])
            #expect(removed.text.contains("APNs credentials removed"))
            #expect(try await client.admin(.get, "/v1/admin/push").decode(PushConfigurationResponse.self).apns == nil)
        }
    }
}
