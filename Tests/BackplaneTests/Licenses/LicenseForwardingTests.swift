import Backplane
import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Synchronization
import Testing
import TestSupport

/// Widevine through the one door, against a license server that does what a real one does: over
/// HTTPS (HTTP/2), it checks the application's API key, fetches the backplane's published
/// entitlement keys and verifies the grant's entitlement before it answers the challenge; it gets
/// the release with the CDM's message. The backplane decides under the download rules first, and
/// returns the server's bytes unchanged.
@Suite(.serialized) struct LicenseForwardingTests {
    /// A backplane served live (the license server fetches its entitlement keys) whose forwards
    /// trust `TestLicenseServer`'s throwaway CA, with that server; the body gets the client, the
    /// fixture and the server. Without openssl the test does not run, which CI records as a failure.
    static func withLicenseServer(
        _ name: String, timeout: Duration, maxInFlight: Int = 64, prepare: @escaping (Fixture) async throws -> Void = { _ in },
        _ body: @escaping @Sendable (Client, Fixture, TestLicenseServer) async throws -> Void
    ) async throws {
        guard let openssl = TestCertificates.openssl else {
            let message = "openssl is not installed (apt-get install openssl): the license forwarding test did not run"
            if ProcessInfo.processInfo.environment["BACKPLANE_REQUIRE_DEPLOY_TOOLS"] == "1" { Issue.record(Comment(rawValue: message)) }
            print("warning: \(message)")
            return
        }
        let root = try createdTemporaryDirectory(name)
        defer { try? FileManager.default.removeItem(at: root) }
        let certificates = try await TestCertificates.make(in: root, openssl: openssl)
        let port = Mutex(0)
        let server = try await TestLicenseServer.start(certificates, backplane: { "http://127.0.0.1:\(port.withLock { $0 })" })
        defer { Task { await server.stop() } }
        let fixture = try await Fixture.make(licenseServers: LicenseServerForwarder.Options(
            allowed: true, trustedCertificateAuthorities: certificates.authority, timeout: timeout, maxInFlight: maxInFlight))
        try await prepare(fixture)
        try await fixture.test(.live) { client in
            port.withLock { $0 = client.raw.port ?? 0 }
            try await body(client, fixture, server)
        }
    }

    @Test func aWidevineChallengeIsDecidedForwardedWithItsEntitlementAndReleased() async throws {
        // A deadline a busy machine's first TLS handshake in a debug build fits in, well short of the slow answer's wait.
        try await Self.withLicenseServer("backplane-license-servers", timeout: .seconds(6), prepare: { fixture in
            _ = try await fixture.services.applications.updateSettings(
                applicationId: fixture.applicationId, ApplicationSettingsUpdate { $0.maxCopiesPerAccount = 1 })
        }) { client, fixture, server in
            let phone = try await client.register(user: "ann", device: "phone").0
            let tablet = try await client.register(user: "ann", device: "tablet").0
            let challenge = Data((0..<300).map { UInt8($0 % 256) })
            let ask = LicenseIssueRequest(assetId: "film", system: .widevine, request: .opaque(challenge))

            // Not configured: refused, and nothing is counted.
            let unconfigured = try await client.device(.post, "/v1/licenses", json: ask, as: phone)
            #expect(unconfigured.status == .forbidden && unconfigured.errorDetails?["reason"] == .string("systemNotConfigured"))
            let set = try await client.admin(
                .put, "/v1/admin/license-servers/widevine",
                json: LicenseServerRequest(url: "https://localhost:\(server.port)/widevine", headers: ["X-Api-Key": "k1"]))
            #expect(set.status == .ok, "\(set.text)")
            let listing = try await client.admin(.get, "/v1/admin/license-servers")
            #expect(try listing.decode(LicenseServerList.self).licenseServers.map(\.headerNames) == [["X-Api-Key"]])
            #expect(!listing.text.contains("k1"), "a header's value is never shown: \(listing.text)")

            // A challenge for Widevine is decided as a permission, then forwarded.
            let issued = try await client.device(.post, "/v1/licenses", json: ask, as: phone)
            #expect(issued.status == .created, "\(issued.text)")
            let license = try issued.decode(LicenseIssueResponse.self)
            #expect(license.clearKey == nil && license.system == .widevine)
            #expect(license.license.flatMap { Data(base64Encoded: $0) } == TestLicenseServer.answer(to: .license, payload: challenge))
            let first = try #require(server.received.first)
            #expect(first.apiKey == "k1" && first.message.kind == .license)
            #expect(first.verified?.sub == "ann" && first.verified?.jti == license.grantId, "the entitlement did not verify")
            #expect(first.message.licenseId == license.licenseId && first.message.policy == license.policy)
            #expect(first.message.payload == challenge.base64EncodedString())

            // The rules hold before anything is forwarded: the second copy is refused here.
            let second = try await client.device(.post, "/v1/licenses", json: ask, as: tablet)
            #expect(second.status == .conflict && second.errorCode == .downloadLimitReached, "\(second.text)")
            #expect(server.received.count == 1)

            // The server refusing (a 4xx) is a denial that names it; failing (5xx) or too slow is a 502.
            server.answer(status: 403)
            let refused = try await client.device(.post, "/v1/licenses", json: ask, as: phone)
            #expect(refused.status == .forbidden && refused.errorDetails?["reason"] == .string("licenseServerRefused"), "\(refused.text)")
            #expect(refused.errorDetails?["licenseServerStatus"] == .int(403))
            // A new license the server refuses is released (the device holds none); a held one,
            // asked again and refused, stays the device's.
            let trailer = try await client.device(
                .post, "/v1/licenses", json: LicenseIssueRequest(assetId: "trailer", system: .widevine, request: .opaque(challenge)), as: phone)
            #expect(trailer.errorDetails?["reason"] == .string("licenseServerRefused"), "\(trailer.text)")
            let afterRefusal = try await client.admin(.get, "/v1/admin/devices/phone/licenses").decode(LicenseList.self).licenses
            #expect(afterRefusal.map(\.assetId) == ["trailer", "film"] && afterRefusal.map(\.state) == ["released", "outstanding"], "\(afterRefusal)")
            for status in [500, 429, 408, 302] {
                server.answer(status: status)
                let failed = try await client.device(.post, "/v1/licenses", json: ask, as: phone)
                #expect(failed.status == .badGateway && failed.errorCode == .licenseServerFailed, "\(status): \(failed.text)")
            }
            server.answer(status: 200, after: .seconds(10))
            let slow = try await client.device(.post, "/v1/licenses", json: ask, as: phone)
            #expect(slow.status == .badGateway && slow.errorCode == .licenseServerFailed, "\(slow.text)")
            server.answer(status: 200)
            // Asked again, the same grant and license are forwarded under (counted once).
            let again = try await client.device(.post, "/v1/licenses", json: ask, as: phone).decode(LicenseIssueResponse.self)
            #expect(again.licenseId == license.licenseId && again.grantId == license.grantId)

            // A ClearKey request for Widevine, or a challenge for ClearKey, is the wrong form.
            let wrong = try await client.device(
                .post, "/v1/licenses", json: LicenseIssueRequest(assetId: "film", system: .widevine, request: ClearKeyRequest(kids: ["AAAAAAAAAAAAAAAAAAAAAA"])),
                as: phone)
            #expect(wrong.errorDetails?["reason"] == .string("wrongRequestForSystem"), "\(wrong.text)")

            // The release: recorded, then forwarded with the CDM's message; the answer comes back.
            let message = Data("release-proof".utf8)
            let released = try await client.device(
                .post, "/v1/licenses/\(license.licenseId)/release", json: LicenseReleaseRequest(message: message.base64EncodedString()), as: phone)
            #expect(released.status == .ok, "\(released.text)")
            let answer = try released.decode(LicenseReleaseResponse.self)
            #expect(answer.license.state == "released")
            #expect(answer.licenseServerAnswer.flatMap { Data(base64Encoded: $0) } == TestLicenseServer.answer(to: .release, payload: message))
            let release = try #require(server.received.last)
            #expect(release.message.kind == .release && release.message.licenseId == license.licenseId && release.message.entitlement == nil)
            // Released, the copy is free: the tablet's license is decided and forwarded.
            let tablets = try await client.device(.post, "/v1/licenses", json: ask, as: tablet)
            #expect(tablets.status == .created, "\(tablets.text)")

            // Removed: refused again.
            #expect(try await client.admin(.delete, "/v1/admin/license-servers/widevine").status == .noContent)
            let removed = try await client.device(.post, "/v1/licenses", json: ask, as: tablet)
            #expect(removed.errorDetails?["reason"] == .string("systemNotConfigured"))
        }
    }

    /// A forward is bounded: an answer past 256 KiB is a failure, and past the node's cap on
    /// forwards in flight a request is refused at once.
    @Test func forwardsAreBoundedInSizeAndInFlight() async throws {
        try await Self.withLicenseServer("backplane-license-bounds", timeout: .seconds(10), maxInFlight: 1) { client, fixture, server in
            let phone = try await client.register(user: "cy", device: "phone").0
            _ = try await client.admin(.put, "/v1/admin/license-servers/widevine", json: LicenseServerRequest(url: "https://localhost:\(server.port)/"))
            func ask(_ assetId: String) async throws -> TestResponse {
                try await client.device(
                    .post, "/v1/licenses", json: LicenseIssueRequest(assetId: assetId, system: .widevine, request: .opaque(Data([1, 2, 3]))), as: phone)
            }
            server.answer(status: 200, padding: WireLimits.maxLicenseServerAnswerBytes)
            let large = try await ask("film")
            #expect(large.status == .badGateway && large.errorCode == .licenseServerFailed, "\(large.text)")

            // Two at once (through the service: the test client sends one request at a time).
            server.answer(status: 200, after: .seconds(3))
            let before = server.received.count
            let licenses = fixture.services.licenses, application = fixture.applicationId
            async let first = licenses.issue(
                applicationId: application, deviceId: phone.deviceId,
                LicenseIssueRequest(assetId: "film", system: .widevine, request: .opaque(Data([1, 2, 3]))))
            // The first is at the license server, held there: the one slot is taken.
            let deadline = ContinuousClock.now + .seconds(20)
            while server.received.count == before, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            do {
                _ = try await licenses.issue(
                    applicationId: application, deviceId: phone.deviceId,
                    LicenseIssueRequest(assetId: "trailer", system: .widevine, request: .opaque(Data([1, 2, 3]))))
                Issue.record("a second forward passed the cap of one in flight")
            } catch let error as ServiceError {
                #expect(error.code == .serviceUnavailable, "\(error)")
            }
            #expect(try await first.0.license != nil)
        }
    }

    @Test func licenseServersAreTheOperatorsToAllow() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let refused = try await client.admin(.put, "/v1/admin/license-servers/widevine", json: LicenseServerRequest(url: "https://wv.example/"))
            #expect(refused.status == .forbidden && refused.text.contains("--allow-license-servers"), "\(refused.text)")
        }
    }

    @Test func licenseServerConfigurationsAreCheckedBeforeTheyAreKept() async throws {
        let fixture = try await Fixture.make(licenseServers: LicenseServerForwarder.Options(allowed: true))
        try await fixture.test { client in
            let cases: [(String, LicenseServerRequest)] = [
                ("clearkey", LicenseServerRequest(url: "https://ck.example/")),
                ("drm9", LicenseServerRequest(url: "https://x.example/")),
                ("widevine", LicenseServerRequest(url: "ftp://x.example/")),
                ("widevine", LicenseServerRequest(url: "http://x.example/")),
                ("widevine", LicenseServerRequest(url: "https://x.example/license?key=secret")),
                ("widevine", LicenseServerRequest(url: "https://x.example/", headers: ["X-Key": "a", "x-key": "b"])),
                ("widevine", LicenseServerRequest(url: "https://user@x.example/")),
                ("widevine", LicenseServerRequest(url: "/relative")),
                ("widevine", LicenseServerRequest(url: "https://x.example/" + String(repeating: "a", count: 2100))),
                ("widevine", LicenseServerRequest(url: "https://x.example/", headers: ["Host": "evil"])),
                ("widevine", LicenseServerRequest(url: "https://x.example/", headers: ["Bad Name": "v"])),
                ("widevine", LicenseServerRequest(url: "https://x.example/", headers: ["X-Key": "a\r\nInjected: 1"])),
                ("widevine", LicenseServerRequest(url: "https://x.example/", headers: ["X-Key": String(repeating: "v", count: 1025)])),
                ("widevine", LicenseServerRequest(
                    url: "https://x.example/", headers: Dictionary(uniqueKeysWithValues: (0..<17).map { ("X-\($0)", "v") }))),
            ]
            for (system, request) in cases {
                let refused = try await client.admin(.put, "/v1/admin/license-servers/\(system)", json: request)
                #expect(refused.status == .badRequest, "\(system) \(request.url.prefix(40)) \(request.headers ?? [:]): \(refused.text)")
            }
            #expect(try await client.admin(.get, "/v1/admin/license-servers").decode(LicenseServerList.self).licenseServers.isEmpty)
            #expect(try await client.admin(.delete, "/v1/admin/license-servers/playready").status == .notFound)
            // A challenge that is not base64, or larger than the limit, is refused before anything.
            let phone = try await client.register(user: "bo", device: "phone").0
            for challenge in ["not base64!", String(repeating: "A", count: 90_000)] {
                let refused = try await client.device(
                    .post, "/v1/licenses", json: ["assetId": "film", "system": "widevine", "request": challenge], as: phone)
                #expect(refused.status == .badRequest, "\(refused.text.prefix(200))")
            }
        }
    }
}
