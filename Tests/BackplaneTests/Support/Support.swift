import Backplane
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import BackplaneWire
import Testing
import TestSupport

/// A backplane on a fresh SQLite data directory with one application, its app key and an admin token.
struct Fixture {
    let directory: URL
    let services: BackplaneServices
    let applicationId: String
    let signer: Signer
    let adminToken: String
    let deviceKeys = DeviceKeys()

    static func make(
        deviceLimit: Int? = nil, directory: URL? = nil, clock: TestClock? = nil, userTokens: UserTokenOptions = UserTokenOptions(),
        push: PushOptions = PushOptions(), commandSupport: CommandSupport = .current,
        licenseServers: LicenseServerForwarder.Options = LicenseServerForwarder.Options()
    ) async throws -> Fixture {
        let directory = directory ?? temporaryDirectory("backplane-tests")
        let store = try SQLiteStore(directory: directory)
        // The data directory's own, as `serve` makes it: a restarted fixture opens the same keys.
        let sealing = try KeyEncryptionKey.inDataDirectory(directory).key
        let services = clock.map { clock in
            BackplaneServices(
                store: store, userTokens: userTokens, push: push, commandSupport: commandSupport, licenseServers: licenseServers,
                keyEncryption: sealing, now: { clock.now })
        } ?? BackplaneServices(
            store: store, userTokens: userTokens, push: push, commandSupport: commandSupport, licenseServers: licenseServers,
            keyEncryption: sealing)
        let (application, key) = try await services.testApplication(name: "test app", deviceLimit: deviceLimit)
        let token = try await services.applications.createToken(applicationId: application.id, scope: .admin, name: "tests")
        return Fixture(
            directory: directory, services: services, applicationId: application.id,
            signer: Signer(keyId: key.keyId, secret: key.secret), adminToken: token)
    }

    /// The same data directory opened by a new store and services, as after a restart.
    func restarted() throws -> Fixture {
        Fixture(
            directory: directory,
            services: BackplaneServices(
                store: try SQLiteStore(directory: directory), keyEncryption: try KeyEncryptionKey.inDataDirectory(directory).key),
            applicationId: applicationId,
            signer: signer, adminToken: adminToken)
    }

    func application() -> some ApplicationProtocol {
        buildApplication(BackplaneConfiguration(port: 0, dataDirectory: directory, logLevel: .error, rateLimits: .tests), services: services)
    }

    /// Runs `body` against the in-process router and removes the data directory afterwards.
    func test(_ setup: TestingSetup = .router, _ body: @escaping @Sendable (Client) async throws -> Void) async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try await application().test(setup) { client in
            try await body(Client(raw: client, fixture: self))
        }
    }
}

/// Signs device requests exactly as `RequestSigning` and docs/openapi.yaml describe.
struct Signer: Sendable {
    var keyId: String
    var secret: String

    func headers(
        method: HTTPRequest.Method, path: String, body: Data, deviceId: String? = nil, credential: String? = nil,
        timestamp: Int64 = Int64(Date().timeIntervalSince1970), nonce: String = UUID().uuidString, proofKey: P256.Signing.PrivateKey? = nil
    ) -> HTTPFields {
        let key = SymmetricKey(data: Data(secret.utf8))
        let signed = try! RequestSigning.headers(
            keyId: keyId, method: method.rawValue, pathAndQuery: path, bodySHA256Hex: RequestSigning.hex(SHA256.hash(data: body)),
            timestamp: timestamp, nonce: nonce, deviceId: deviceId, credential: credential,
            mac: { HMAC<SHA256>.authenticationCode(for: Data($0.utf8), using: key).withUnsafeBytes { RequestSigning.hex($0) } },
            proof: proofKey.map { proofKey in { Base64URL.encode(try proofKey.signature(for: Data($0.utf8)).rawRepresentation) } })
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        for (name, value) in signed { headers[HTTPField.Name(name)!] = value }
        return headers
    }
}

/// The device keys of the installs a test plays: one per device id, made at its first
/// registration and reused after, as an install keeps its key with its device id.
final class DeviceKeys: @unchecked Sendable {
    private let lock = NSLock()
    private var keys: [String: P256.Signing.PrivateKey] = [:]

    func key(for deviceId: String) -> P256.Signing.PrivateKey {
        lock.withLock {
            if let key = keys[deviceId] { return key }
            let key = P256.Signing.PrivateKey()
            keys[deviceId] = key
            return key
        }
    }

    static func publicKey(_ key: P256.Signing.PrivateKey) -> String { Base64URL.encode(key.publicKey.x963Representation) }
}

/// What a registered device needs to make its own requests.
struct DeviceIdentity: Sendable {
    var deviceId: String
    var credential: String
}

struct Client: Sendable {
    let raw: any TestClientProtocol
    let fixture: Fixture

    /// A signed device request (app key only when `as` is nil). Signed again, once, when the
    /// server answers that it was signed before a restart, as the SDK does (`notBefore`).
    func device(
        _ method: HTTPRequest.Method, _ path: String, json: some Encodable = Empty?.none, as identity: DeviceIdentity? = nil,
        signer: Signer? = nil, at time: Date = Date(), proofKey: P256.Signing.PrivateKey? = nil
    ) async throws -> TestResponse {
        let body = try Self.encode(json)
        func send(at timestamp: Int64) async throws -> TestResponse {
            let headers = (signer ?? fixture.signer).headers(
                method: method, path: path, body: body, deviceId: identity?.deviceId, credential: identity?.credential,
                timestamp: timestamp, proofKey: proofKey)
            return try await raw.execute(uri: path, method: method, headers: headers, body: ByteBuffer(bytes: body))
        }
        let response = try await send(at: Int64(time.timeIntervalSince1970))
        guard response.errorCode == .staleTimestamp,
              let notBefore = (try? response.decode(ErrorBody.self))?.error.details?["notBefore"]?.intValue
        else { return response }
        return try await send(at: notBefore)
    }

    func raw(_ method: HTTPRequest.Method, _ path: String, headers: HTTPFields = [:], body: Data = Data()) async throws -> TestResponse {
        try await raw.execute(uri: path, method: method, headers: headers, body: ByteBuffer(bytes: body))
    }

    /// A bearer-token request (the fixture's admin token unless another is given).
    func admin(_ method: HTTPRequest.Method, _ path: String, json: some Encodable = Empty?.none, token: String? = nil) async throws -> TestResponse {
        var headers = HTTPFields()
        headers[.authorization] = "Bearer \(token ?? fixture.adminToken)"
        headers[.contentType] = "application/json"
        return try await raw.execute(uri: path, method: method, headers: headers, body: ByteBuffer(bytes: try Self.encode(json)))
    }

    /// Registers a device as the install holding its device key (`fixture.deviceKeys`), and
    /// returns its identity and the full answer.
    @discardableResult
    func register(
        user: String, device: String = UUID().uuidString, external: String? = nil, move: Bool? = nil
    ) async throws -> (DeviceIdentity, RegisterDeviceResponse) {
        let key = fixture.deviceKeys.key(for: device)
        let response = try await self.device(.post, "/v1/devices/register", json: RegisterDeviceRequest(
            userId: user, deviceId: device, externalDeviceId: external, platform: "linux", model: "test",
            sdkVersion: "0.1.0", moveFromOtherUser: move, devicePublicKey: DeviceKeys.publicKey(key)), proofKey: key)
        #expect(response.status == .created || response.status == .ok, "registration failed: \(response.text)")
        let body = try response.decode(RegisterDeviceResponse.self)
        return (DeviceIdentity(deviceId: body.device.deviceId, credential: body.deviceCredential), body)
    }

    static func encode(_ value: some Encodable) throws -> Data {
        if let optional = value as? Empty?, optional == nil { return Data() }
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        // Stable bytes: some tests sign one encoding and send another of the same value.
        encoder.outputFormatting = .sortedKeys
        return try encoder.encode(value)
    }
}

/// A clock a test can move forward.
final class TestClock: @unchecked Sendable {
    private let lock = NSLock()
    private var current = Date()

    var now: Date { lock.withLock { current } }

    func advance(by seconds: TimeInterval) {
        lock.withLock { current = current.addingTimeInterval(seconds) }
    }
}

/// Stands for "no body".
struct Empty: Codable, Equatable {}

extension TestResponse {
    var text: String { String(buffer: body) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode(T.self, from: Data(buffer: body))
    }

    /// The error code of an error body, or nil when the body is not one.
    var errorCode: ErrorCode? { (try? decode(ErrorBody.self))?.error.code }
    var errorDetails: [String: JSONValue]? { (try? decode(ErrorBody.self))?.error.details }
}
