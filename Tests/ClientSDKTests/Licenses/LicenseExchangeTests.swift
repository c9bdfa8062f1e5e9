import Backplane
import ClientSDK
import Foundation
import BackplaneWire
import Synchronization
import Testing
import TestSupport

/// `engine.licenses.exchange`, as an app's key-session code calls it for Widevine (or FairPlay,
/// PlayReady): the challenge goes through the backplane's door to the application's license
/// server and the answer comes back byte for byte; the SDK keeps the license, so a sync renews
/// it, the app's release carries the CDM's message, and deleting an asset releases its license.
@Suite(.serialized) struct LicenseExchangeTests {
    @Test func aKeySessionsChallengeIsExchangedRenewedAndReleasedThroughTheBackplane() async throws {
        guard let openssl = TestCertificates.openssl else {
            let message = "openssl is not installed (apt-get install openssl): the license exchange test did not run"
            if ProcessInfo.processInfo.environment["BACKPLANE_REQUIRE_DEPLOY_TOOLS"] == "1" { Issue.record(Comment(rawValue: message)) }
            print("warning: \(message)")
            return
        }
        let root = try createdTemporaryDirectory("sdk-license-exchange")
        defer { try? FileManager.default.removeItem(at: root) }
        let certificates = try await TestCertificates.make(in: root, openssl: openssl)
        let backplane = try await InProcessBackplane.start(
            licenseServers: LicenseServerForwarder.Options(allowed: true, trustedCertificateAuthorities: certificates.authority))
        let port = backplane.port
        let licenseServer = try await TestLicenseServer.start(certificates, backplane: { "http://127.0.0.1:\(port)" })
        defer { Task { await licenseServer.stop() } }
        _ = try await backplane.services.licenseServers.set(
            applicationId: backplane.applicationId, system: "widevine",
            LicenseServerRequest(url: "https://localhost:\(licenseServer.port)/wv", headers: ["X-Api-Key": "k1"]))
        let bench = try await DownloadBench.start(server: backplane)
        for asset in ["film", "short"] {
            bench.origin.serve("/\(asset).mp4", TestOrigin.content(5_000))
            try await bench.engine.downloads.enqueue(DownloadRequest(assetId: asset, url: bench.origin.url("/\(asset).mp4")))
            #expect(try await bench.waitForOutcome(asset).state == .completed)
        }
        let deviceId = try #require(await bench.engine.status.deviceId)

        // The key session's challenge out, the license server's bytes back unchanged.
        let challenge = Data((0..<200).map { UInt8(255 - $0) })
        let exchanged = try await bench.engine.licenses.exchange(assetId: "film", system: .widevine, challenge: challenge)
        #expect(exchanged.license == TestLicenseServer.answer(to: .license, payload: challenge))
        let forwarded = try #require(licenseServer.received.last)
        #expect(forwarded.verified?.deviceId == deviceId && forwarded.verified?.assetId == "film" && forwarded.apiKey == "k1")
        #expect(forwarded.message.licenseId == exchanged.licenseId && forwarded.message.policy == exchanged.policy)
        // The grant the download holds is the license's: counted once.
        let licenses = try await backplane.services.licenses.list(applicationId: backplane.applicationId, deviceId: deviceId, limit: nil)
        #expect(licenses.licenses.map(\.system) == [.widevine] && licenses.licenses.first?.state == "outstanding")
        let grants = try await backplane.services.grants.list(
            applicationId: backplane.applicationId, userId: nil, deviceId: deviceId, cursor: nil, limit: nil)
        #expect(Set(grants.grants.map(\.grantId)).contains(licenses.licenses[0].grantId))

        // A refusal is the backplane's error, with its reason.
        await #expect(throws: BackplaneClientError.self) {
            try await bench.engine.licenses.exchange(assetId: "film", system: .clearKey, challenge: challenge)
        }
        do {
            _ = try await bench.engine.licenses.exchange(assetId: "film", system: .playReady, challenge: challenge)
            Issue.record("no PlayReady server is configured")
        } catch let error as BackplaneClientError {
            #expect(error.code == .licenseDenied && error.details?["reason"] == .string("systemNotConfigured"), "\(error)")
        }

        // Every sync reports it; the backplane renews it.
        _ = try await bench.engine.sync()
        let renewed = try await backplane.services.licenses.list(applicationId: backplane.applicationId, deviceId: deviceId, limit: nil)
        #expect(renewed.licenses.first?.renewedAt != nil, "the sync did not report the exchanged license")

        // The app's release carries the CDM's message; the server's answer is the CDM's.
        let message = Data("secure stop".utf8)
        let answer = try await bench.engine.licenses.release(licenseId: exchanged.licenseId, message: message)
        #expect(answer == TestLicenseServer.answer(to: .release, payload: message))
        #expect(licenseServer.received.last?.message.kind == .release && licenseServer.received.last?.message.payload == message.base64EncodedString())
        let released = try await backplane.services.licenses.list(applicationId: backplane.applicationId, deviceId: deviceId, limit: nil)
        #expect(released.licenses.first?.state == "released")

        // Deleting an asset releases its exchanged license without a message.
        let short = try await bench.engine.licenses.exchange(assetId: "short", system: .widevine, challenge: challenge)
        try await bench.engine.downloads.remove(assetId: "short")
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline, licenseServer.received.last?.message.licenseId != short.licenseId
            || licenseServer.received.last?.message.kind != .release
        {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(licenseServer.received.last?.message.kind == .release && licenseServer.received.last?.message.licenseId == short.licenseId)
        #expect(licenseServer.received.last?.message.payload == nil)
        await bench.stop()
    }
}
