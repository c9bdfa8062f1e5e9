import Foundation
import BackplaneWire

/// Applications, their settings, app keys and bearer tokens.
public protocol ApplicationStore: Sendable {
    func createApplication(_ application: ApplicationRecord, key: AppKeyRecord) async throws
    func application(id: String) async throws -> ApplicationRecord?
    func applications() async throws -> [ApplicationRecord]
    func updateSettings(applicationId: String, _ change: @escaping @Sendable (ApplicationSettings) throws -> ApplicationSettings) async throws -> ApplicationSettings?

    /// How the application's user tokens are checked; nil when it has no such configuration.
    func userIdentity(applicationId: String) async throws -> UserIdentityRecord?
    /// Replaces the application's configuration (its application must exist).
    func setUserIdentity(_ record: UserIdentityRecord) async throws
    /// False when there was none.
    func deleteUserIdentity(applicationId: String) async throws -> Bool
    /// Binds a user token, by its `jti`, to the device it registers, until `expiresAt`: the
    /// device it is bound to, `deviceId` when the token was unused or already bound to it.
    /// Bindings that ended before `now` are forgotten on the way.
    func bindUserToken(applicationId: String, tokenId: String, deviceId: String, expiresAt: Date, now: Date) async throws -> String

    func addAppKey(_ key: AppKeyRecord) async throws
    func appKey(id: String) async throws -> AppKeyRecord?
    func appKeys(applicationId: String) async throws -> [AppKeyRecord]
    /// Sets `revokedAt` once `check` (given the application's unrevoked keys) allows it. Nil when the key is unknown.
    func revokeAppKey(applicationId: String, keyId: String, at: Date, check: @escaping @Sendable ([AppKeyRecord]) throws -> Void) async throws -> AppKeyRecord?

    func createToken(_ token: TokenRecord) async throws
    func token(hash: String) async throws -> TokenRecord?
    /// The application's tokens, revoked and expired ones included, oldest first.
    func tokens(applicationId: String) async throws -> [TokenRecord]
    /// Sets `revokedAt` unless it is set already. Nil when the application has no such token.
    func revokeToken(applicationId: String, tokenId: String, at: Date) async throws -> TokenRecord?
    /// Writes when app keys and tokens were last used; a time older than the stored one changes nothing.
    func recordCredentialUse(keys: [String: Date], tokens: [String: Date]) async throws
}

public struct ApplicationRecord: Sendable, Equatable, Codable {
    public var id: String
    public var name: String
    public var settings: ApplicationSettings
    public var createdAt: Date
}

/// An application's user-token configuration (`UserIdentityService`). The key set is kept as the
/// JSON the admin sent; the secret as is, like an app key's (verifying an HMAC needs it).
public struct UserIdentityRecord: Sendable, Equatable, Codable {
    public var applicationId: String
    public var required: Bool
    public var issuer: String
    public var audience: String
    /// The JSON Web Key Set, as JSON text.
    public var jwks: String?
    public var jwksUrl: String?
    public var hs256Secret: String?
    public var updatedAt: Date
}

public struct AppKeyRecord: Sendable, Equatable, Codable {
    public var keyId: String
    public var applicationId: String
    /// Kept as is: verifying an HMAC needs the secret itself. Protect the data directory.
    public var secret: String
    public var createdAt: Date
    public var revokedAt: Date?
    /// As last written (`CredentialUseLog` keeps the newer times in memory for a few seconds).
    public var lastUsedAt: Date? = nil
}

public struct TokenRecord: Sendable, Equatable, Codable {
    public var id: String
    public var applicationId: String
    public var scope: TokenScope
    /// SHA-256 of the token; the token itself is shown once and never stored.
    public var tokenHash: String
    public var name: String
    public var createdAt: Date
    public var revokedAt: Date?
    /// Nil: valid until revoked.
    public var expiresAt: Date? = nil
    public var lastUsedAt: Date? = nil
}
