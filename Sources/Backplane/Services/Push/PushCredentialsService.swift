import Foundation
import JWTKit
import BackplaneWire

/// The applications' push credentials, as admins set them (`/v1/admin/push/...`, `backplane app
/// push`, the console). Checked whole before anything is stored: a key that does not parse, or
/// a service account without what signing needs, is a 400 and changes nothing. Secrets are
/// never shown back.
public struct PushCredentialsService: Sendable {
    let store: any BackplaneStore
    let now: @Sendable () -> Date
    /// Forgets this node's copy of an application's credentials when they change here.
    let changed: @Sendable (String) -> Void

    public init(store: any BackplaneStore, now: @escaping @Sendable () -> Date = { Date() }, changed: @escaping @Sendable (String) -> Void = { _ in }) {
        self.store = store
        self.now = now
        self.changed = changed
    }

    /// Largest stored secret (a .p8 key is under 300 bytes, a service account about 2.4 KB).
    static let maxSecretBytes = 16 * 1024

    public func configuration(applicationId: String) async throws -> PushConfigurationResponse {
        var response = PushConfigurationResponse(applicationId: applicationId)
        for record in try await store.pushCredentials(applicationId: applicationId) {
            switch record.provider {
            case .apns:
                guard let credentials = try? APNsCredentials(record) else { continue }
                response.apns = APNsConfiguration(
                    teamId: credentials.teamId, keyId: credentials.keyId, topic: credentials.topic,
                    environment: credentials.environment, setAt: record.setAt, broken: record.broken)
            case .fcm:
                guard let account = try? FCMServiceAccount(record) else { continue }
                response.fcm = FCMConfiguration(projectId: account.projectId, setAt: record.setAt, broken: record.broken)
            default:
                continue  // a provider of a later release, stored before a downgrade
            }
        }
        return response
    }

    public func setAPNs(applicationId: String, _ update: APNsCredentialsUpdate) async throws -> PushConfigurationResponse {
        try Self.check(update)
        try await store(applicationId, .apns, secret: try JSONEncoder().encode(update))
        return try await configuration(applicationId: applicationId)
    }

    public func setFCM(applicationId: String, _ update: FCMCredentialsUpdate) async throws -> PushConfigurationResponse {
        guard case .object = update.serviceAccount else {
            throw ServiceError.validation("'serviceAccount' must be the service account's JSON object.", field: "serviceAccount")
        }
        let secret = try JSONEncoder().encode(update.serviceAccount)
        let account: FCMServiceAccount
        do {
            account = try JSONDecoder().decode(FCMServiceAccount.self, from: secret)
        } catch {
            throw ServiceError.validation(
                "'serviceAccount' needs 'project_id', 'private_key' and 'client_email' (the JSON file of a Google service account).",
                field: "serviceAccount")
        }
        try Self.check(account)
        try await store(applicationId, .fcm, secret: secret)
        return try await configuration(applicationId: applicationId)
    }

    /// 404 when the application has none for the provider.
    public func delete(applicationId: String, provider: PushProvider) async throws {
        guard try await store.deletePushCredentials(applicationId: applicationId, provider: provider) else {
            throw ServiceError.notFound("The application has no \(provider.rawValue) credentials.")
        }
        changed(applicationId)
    }

    private func store(_ applicationId: String, _ provider: PushProvider, secret: Data) async throws {
        guard secret.count <= Self.maxSecretBytes else {
            throw ServiceError.validation("The credentials are larger than \(Self.maxSecretBytes) bytes.")
        }
        // New credentials are not broken, whatever the old ones were.
        try await store.setPushCredentials(PushCredentialsRecord(
            applicationId: applicationId, provider: provider, secret: String(decoding: secret, as: UTF8.self), setAt: now()))
        changed(applicationId)
    }

    // MARK: checks

    static func check(_ update: APNsCredentialsUpdate) throws {
        try checkName(update.teamId, field: "teamId", allowed: "A-Z, a-z, 0-9")
        try checkName(update.keyId, field: "keyId", allowed: "A-Z, a-z, 0-9")
        try checkName(update.topic, field: "topic", allowed: "A-Z, a-z, 0-9, '.', '-', '_'", extra: "._-")
        guard update.privateKey.utf8.count <= 8 * 1024, (try? ES256PrivateKey(pem: update.privateKey)) != nil else {
            throw ServiceError.validation(
                "'privateKey' must be the text of the .p8 file: a PEM P-256 private key (BEGIN PRIVATE KEY).", field: "privateKey")
        }
    }

    static func check(_ account: FCMServiceAccount) throws {
        try checkName(account.projectId, field: "serviceAccount.project_id", allowed: "a-z, A-Z, 0-9, '-', '.', '_', ':'", extra: "-._:")
        // It is a segment of the send URL's path: never "." or "..", nor one that starts so.
        guard account.projectId.first?.isLetter == true || account.projectId.first?.isNumber == true, !account.projectId.contains("..") else {
            throw ServiceError.validation("'serviceAccount.project_id' must start with a letter or a digit.", field: "serviceAccount.project_id")
        }
        try Validate.text(account.clientEmail, field: "serviceAccount.client_email", maxLength: 320)
        if let keyId = account.privateKeyId { try Validate.optionalText(keyId, field: "serviceAccount.private_key_id", maxLength: 128) }
        if let type = account.type, type != "service_account" {
            throw ServiceError.validation("'serviceAccount.type' must be service_account.", field: "serviceAccount.type")
        }
        guard (try? Insecure.RSA.PrivateKey(pem: account.privateKey)) != nil else {
            throw ServiceError.validation(
                "'serviceAccount.private_key' must be a PEM RSA private key of 2048 bits or more.", field: "serviceAccount.private_key")
        }
    }

    /// 1 to 128 ASCII letters and digits (and `extra`): these go into a URL path, a header or a claim.
    private static func checkName(_ value: String, field: String, allowed: String, extra: String = "") throws {
        let extra = Set(extra.utf8)
        guard (1...128).contains(value.utf8.count),
            value.utf8.allSatisfy({ byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || extra.contains(byte)
            })
        else {
            throw ServiceError.validation("'\(field)' must be 1 to 128 characters of \(allowed).", field: field)
        }
    }
}

/// An application's APNs key with its ids, as stored (the body of `PUT /v1/admin/push/apns`).
typealias APNsCredentials = APNsCredentialsUpdate

extension APNsCredentialsUpdate {
    init(_ record: PushCredentialsRecord) throws {
        self = try JSONDecoder().decode(APNsCredentialsUpdate.self, from: Data(record.secret.utf8))
    }
}

/// What the backplane reads of a Google service account; the rest of the file is kept, unused.
struct FCMServiceAccount: Decodable, Sendable, Equatable {
    var type: String?
    var projectId: String
    var privateKeyId: String?
    var privateKey: String
    var clientEmail: String
    var tokenURI: String?

    enum CodingKeys: String, CodingKey {
        case type
        case projectId = "project_id"
        case privateKeyId = "private_key_id"
        case privateKey = "private_key"
        case clientEmail = "client_email"
        case tokenURI = "token_uri"
    }

    init(_ record: PushCredentialsRecord) throws {
        self = try JSONDecoder().decode(FCMServiceAccount.self, from: Data(record.secret.utf8))
    }
}
