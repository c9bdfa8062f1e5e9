import AsyncHTTPClient
import Backplane
import Foundation
import HTTPTypes
import JWTKit
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
    /// What the test license server received: each message, with whether its entitlement
    /// verified against the backplane's published keys.
    final class Received: Sendable {
        let messages = Mutex<[(message: ForwardedLicenseMessage, apiKey: String?, verified: EntitlementClaims?)]>([])
        /// How the next answers go: a status and a delay.
        let answer = Mutex<(status: Int, delay: Duration)>((200, .zero))
    }

    static func licenseServer(
        _ certificates: TestCertificates.Made, backplane: @escaping @Sendable () -> String, received: Received
    ) async throws -> LocalHTTP2Server {
        try await LocalHTTP2Server.start(certificate: certificates.certificate, privateKey: certificates.privateKey) { request in
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            guard request.method == "POST", request.header("content-type") == "application/json",
                let message = try? decoder.decode(ForwardedLicenseMessage.self, from: request.body)
            else { return .json(400, #"{"error":"not a forwarded message"}"#) }
            var claims: EntitlementClaims?
            if let token = message.entitlement {
                // What a license server does with an entitlement: the published keys, then the claims.
                let url = "\(backplane())/v1/applications/\(message.applicationId)/entitlement-keys"
                if let response = try? await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(10)),
                    let body = try? await response.body.collect(upTo: 1 << 16),
                    let keys = try? await JWTKeyCollection().add(jwksJSON: String(buffer: body)),
                    let verified = try? await keys.verify(token, as: EntitlementClaims.self),
                    verified.jti == message.grantId, verified.deviceId == message.deviceId, verified.assetId == message.assetId
                {
                    claims = verified
                }
            }
            received.messages.withLock { $0.append((message, request.header("x-api-key"), claims)) }
            let (status, delay) = received.answer.withLock { $0 }
            if delay > .zero { try? await Task.sleep(for: delay) }
            guard message.kind == .license ? claims != nil : true else { return .json(403, #"{"error":"entitlement"}"#) }
            let payload = Data(base64Encoded: message.payload ?? "") ?? Data()
            // Opaque bytes, not UTF-8: returned unchanged means byte for byte.
            let body = Data([0xFF, 0x00, 0xFE]) + Data(message.kind.rawValue.utf8) + payload
            return LocalHTTP2Server.Answer(status: status, headers: [("content-type", "application/octet-stream")], body: body)
        }
    }

    @Test func aWidevineChallengeIsDecidedForwardedWithItsEntitlementAndReleased() async throws {
        guard let openssl = TestCertificates.openssl else {
            let message = "openssl is not installed (apt-get install openssl): the license forwarding test did not run"
            if ProcessInfo.processInfo.environment["BACKPLANE_REQUIRE_DEPLOY_TOOLS"] == "1" { Issue.record(Comment(rawValue: message)) }
            print("warning: \(message)")
            return
        }
        let root = try createdTemporaryDirectory("backplane-license-servers")
        defer { try? FileManager.default.removeItem(at: root) }
        let certificates = try await TestCertificates.make(in: root, openssl: openssl)
        let received = Received()
        let port = Mutex(0)
        let server = try await Self.licenseServer(certificates, backplane: { "http://127.0.0.1:\(port.withLock { $0 })" }, received: received)
        defer { Task { await server.stop() } }
        let fixture = try await Fixture.make(licenseServers: LicenseServerForwarder.Options(
            trustedCertificateAuthorities: certificates.authority, timeout: .seconds(3)))
        _ = try await fixture.services.applications.updateSettings(
            applicationId: fixture.applicationId, ApplicationSettingsUpdate { $0.maxCopiesPerAccount = 1 })
        try await fixture.test(.live) { client in
            port.withLock { $0 = client.raw.port ?? 0 }
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
            let listed = try await client.admin(.get, "/v1/admin/license-servers").decode(LicenseServerList.self)
            #expect(listed.licenseServers.map(\.headerNames) == [["X-Api-Key"]] && !listed.licenseServers.description.contains("k1"))

            // A challenge for Widevine is decided as a permission, then forwarded.
            let issued = try await client.device(.post, "/v1/licenses", json: ask, as: phone)
            #expect(issued.status == .created, "\(issued.text)")
            let license = try issued.decode(LicenseIssueResponse.self)
            #expect(license.clearKey == nil && license.system == .widevine)
            #expect(license.license.flatMap { Data(base64Encoded: $0) } == Data([0xFF, 0x00, 0xFE]) + Data("license".utf8) + challenge)
            let first = try #require(received.messages.withLock { $0.first })
            #expect(first.apiKey == "k1" && first.message.kind == .license)
            #expect(first.verified?.sub == "ann" && first.verified?.jti == license.grantId, "the entitlement did not verify")
            #expect(first.message.licenseId == license.licenseId && first.message.policy == license.policy)
            #expect(first.message.payload == challenge.base64EncodedString())

            // The rules hold before anything is forwarded: the second copy is refused here.
            let second = try await client.device(.post, "/v1/licenses", json: ask, as: tablet)
            #expect(second.status == .conflict && second.errorCode == .downloadLimitReached, "\(second.text)")
            #expect(received.messages.withLock { $0.count } == 1)

            // The server refusing (a 4xx) is a denial that names it; failing (5xx) or too slow is a 502.
            received.answer.withLock { $0 = (403, .zero) }
            let refused = try await client.device(.post, "/v1/licenses", json: ask, as: phone)
            #expect(refused.status == .forbidden && refused.errorDetails?["reason"] == .string("licenseServerRefused"), "\(refused.text)")
            #expect(refused.errorDetails?["licenseServerStatus"] == .int(403))
            received.answer.withLock { $0 = (500, .zero) }
            let failed = try await client.device(.post, "/v1/licenses", json: ask, as: phone)
            #expect(failed.status == .badGateway && failed.errorCode == .licenseServerFailed, "\(failed.text)")
            received.answer.withLock { $0 = (200, .seconds(5)) }
            let slow = try await client.device(.post, "/v1/licenses", json: ask, as: phone)
            #expect(slow.status == .badGateway && slow.errorCode == .licenseServerFailed, "\(slow.text)")
            received.answer.withLock { $0 = (200, .zero) }
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
            #expect(answer.licenseServerAnswer.flatMap { Data(base64Encoded: $0) } == Data([0xFF, 0x00, 0xFE]) + Data("release".utf8) + message)
            let release = try #require(received.messages.withLock { $0.last })
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

    @Test func licenseServerConfigurationsAreCheckedBeforeTheyAreKept() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let cases: [(String, LicenseServerRequest)] = [
                ("clearkey", LicenseServerRequest(url: "https://ck.example/")),
                ("drm9", LicenseServerRequest(url: "https://x.example/")),
                ("widevine", LicenseServerRequest(url: "ftp://x.example/")),
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
