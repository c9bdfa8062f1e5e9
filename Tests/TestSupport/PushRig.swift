import Backplane
import Crypto
import Foundation
import JWTKit
import BackplaneWire

/// Local APNs and Google endpoints, and the push options that point a backplane at them (HTTP/2 over TLS
/// with a certificate openssl makes), with the keys those endpoints trust.
public struct PushRig: Sendable {
    public let certificates: TestCertificates.Made
    public let apns: LocalAPNs
    public let google: LocalGoogle
    /// The .p8 text and ids the APNs endpoint trusts.
    public let apnsCredentials: APNsCredentialsUpdate
    /// The service account the token endpoint trusts.
    public let serviceAccount: JSONValue
    public let options: PushOptions

    public static let topic = "com.example.video"
    public static let teamId = "TEAM123456"
    public static let keyId = "KEY1234567"
    public static let projectId = "backplane-demo"
    public static let clientEmail = "push@backplane-demo.iam.gserviceaccount.com"

    /// `now` is the providers' clock, for a test that moves the backplane's.
    public static func start(
        spacing: Duration = .seconds(30), firstRetryDelay: Duration = .milliseconds(20), now: @escaping @Sendable () -> Date = { Date() }
    ) async throws -> PushRig {
        guard let openssl = TestCertificates.openssl else {
            throw TestCertificates.Failure(description: "openssl is needed for the local push endpoints' certificates")
        }
        let directory = temporaryDirectory("backplane-push")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let certificates = try await TestCertificates.make(in: directory, openssl: openssl)
        let appleKey = P256.Signing.PrivateKey()
        let apns = try await LocalAPNs.start(
            certificates, teamId: teamId, keyId: keyId, publicKey: try ES256PublicKey(pem: appleKey.publicKey.pemRepresentation), topic: topic,
            now: now)
        let rsaPath = directory.appendingPathComponent("service-account.pem").path
        let made = try await ChildProcess.run(openssl, ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", rsaPath])
        guard made.status == 0 else { throw TestCertificates.Failure(description: "openssl genpkey: \(made.output)") }
        let rsaPEM = try String(contentsOfFile: rsaPath, encoding: .utf8)
        let rsaKey = try Insecure.RSA.PrivateKey(pem: rsaPEM)
        let google = try await LocalGoogle.start(
            certificates, projectId: projectId, clientEmail: clientEmail, keyId: "sa-key-1", publicKey: rsaKey.publicKey, now: now)
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

    public func stop() async {
        await apns.server.stop()
        await google.server.stop()
    }

    /// Waits up to `seconds` for `condition`.
    public static func eventually(within seconds: Double, _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }
}

