import Backplane
import Crypto
import Foundation
import JWTKit
import BackplaneWire
import Testing
import TestSupport

/// A backplane whose push options point at local APNs and Google endpoints (HTTP/2 over TLS
/// with a certificate openssl makes), with the keys those endpoints trust.
struct PushRig {
    let certificates: TestCertificates.Made
    let apns: LocalAPNs
    let google: LocalGoogle
    /// The .p8 text and ids the APNs endpoint trusts.
    let apnsCredentials: APNsCredentialsUpdate
    /// The service account the token endpoint trusts.
    let serviceAccount: JSONValue
    let options: PushOptions

    static let topic = "com.example.video"
    static let teamId = "TEAM123456"
    static let keyId = "KEY1234567"
    static let projectId = "backplane-demo"
    static let clientEmail = "push@backplane-demo.iam.gserviceaccount.com"

    static func start(spacing: Duration = .seconds(30), firstRetryDelay: Duration = .milliseconds(20)) async throws -> PushRig {
        let openssl = try #require(TestCertificates.openssl, "openssl is needed for the local push endpoints' certificates")
        let directory = temporaryDirectory("backplane-push")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let certificates = try await TestCertificates.make(in: directory, openssl: openssl)
        let appleKey = P256.Signing.PrivateKey()
        let apns = try await LocalAPNs.start(
            certificates, teamId: teamId, keyId: keyId, publicKey: try ES256PublicKey(pem: appleKey.publicKey.pemRepresentation), topic: topic)
        let rsaPath = directory.appendingPathComponent("service-account.pem").path
        let made = try await ChildProcess.run(openssl, ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", rsaPath])
        #expect(made.status == 0, "openssl genpkey: \(made.output)")
        let rsaPEM = try String(contentsOfFile: rsaPath, encoding: .utf8)
        let rsaKey = try Insecure.RSA.PrivateKey(pem: rsaPEM)
        let google = try await LocalGoogle.start(
            certificates, projectId: projectId, clientEmail: clientEmail, keyId: "sa-key-1", publicKey: rsaKey.publicKey)
        let serviceAccount: JSONValue = .object([
            "type": .string("service_account"), "project_id": .string(projectId), "private_key_id": .string("sa-key-1"),
            "private_key": .string(rsaPEM), "client_email": .string(clientEmail), "client_id": .string("1234567890"),
            "token_uri": .string("https://oauth2.googleapis.com/token"),
        ])
        return PushRig(
            certificates: certificates, apns: apns, google: google,
            apnsCredentials: APNsCredentialsUpdate(
                teamId: teamId, keyId: keyId, privateKey: appleKey.pemRepresentation, topic: topic, environment: .production),
            serviceAccount: serviceAccount,
            options: PushOptions(
                apnsURL: apns.server.url, fcmURL: google.server.url, googleTokenURL: google.tokenURL,
                trustedCertificateAuthorities: certificates.authority, spacing: spacing, channelAnswerWindow: .milliseconds(300),
                maxAttempts: 4, firstRetryDelay: firstRetryDelay))
    }

    func stop() async {
        await apns.server.stop()
        await google.server.stop()
    }

    /// Sets both providers' credentials of the fixture's application.
    func configure(_ client: Client) async throws {
        let apns = try await client.admin(.put, "/v1/admin/push/apns", json: apnsCredentials)
        #expect(apns.status == .ok, "\(apns.text)")
        let fcm = try await client.admin(.put, "/v1/admin/push/fcm", json: FCMCredentialsUpdate(serviceAccount: serviceAccount))
        #expect(fcm.status == .ok, "\(fcm.text)")
    }

    /// Waits up to `seconds` for `condition`.
    static func eventually(within seconds: Double, _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }
}

extension Client {
    /// Registers a device with a push token of `provider`.
    @discardableResult
    func registerForPush(user: String = "alice", token: String, provider: PushProvider?, platform: String = "ios") async throws -> DeviceIdentity {
        let device = UUID().uuidString
        let key = fixture.deviceKeys.key(for: device)
        let response = try await self.device(.post, "/v1/devices/register", json: RegisterDeviceRequest(
            userId: user, deviceId: device, platform: platform, pushToken: token, pushProvider: provider,
            devicePublicKey: DeviceKeys.publicKey(key)), proofKey: key)
        #expect(response.status == .created, "registration failed: \(response.text)")
        let body = try response.decode(RegisterDeviceResponse.self)
        return DeviceIdentity(deviceId: body.device.deviceId, credential: body.deviceCredential)
    }

    func wipe(_ device: DeviceIdentity) async throws {
        let response = try await admin(.post, "/v1/admin/commands", json: EnqueueCommandRequest(type: .wipe, deviceId: device.deviceId))
        #expect(response.status == .created, "\(response.text)")
    }

    func adminDevice(_ device: DeviceIdentity) async throws -> Device {
        try await admin(.get, "/v1/admin/devices/\(device.deviceId)").decode(DeviceResponse.self).device
    }
}
