import Foundation

/// User tokens: a JWT that the app's own backend signs for its signed-in user, and the backplane
/// checks before it binds a device to that user (registration, and a move to another user).
/// Without them the app key, which ships in every copy of the app, is enough to act as any user.
public enum UserToken {
    /// The request header that carries the token.
    public static let header = "X-Backplane-User-Token"
    /// The longest token taken, in bytes; a longer one is refused (`user_token_invalid`).
    public static let maxLength = 8 * 1024
    /// How far `exp`, `nbf` and `iat` may be off the backplane's clock.
    public static let leeway: TimeInterval = 60
    /// A token may be valid for at most this long: its `exp` no later than this after `iat`, and
    /// no later than this after the backplane's now. Backends should issue tokens of minutes.
    public static let maxLifetime: TimeInterval = 24 * 60 * 60
    /// The algorithms accepted: HS256 only when the application set a shared secret, the others
    /// only with a key of that type. `none` never.
    public static let acceptedAlgorithms = ["ES256", "RS256", "EdDSA", "HS256"]
    /// The claim that binds a token to one install: when present, it must be the registration's
    /// `deviceId`. A token with a `jti` instead is bound to the first device it registers.
    public static let deviceIdClaim = "deviceId"
    /// The longest `jti` taken, in bytes.
    public static let maxTokenIdLength = 256
}

/// `PUT /v1/admin/user-identity`: whether registrations need a user token, and how to check one.
/// Keys come inline (`jwks`), from a URL the backplane fetches (`jwksUrl`, only where its
/// operator allows it), or as a shared secret (`hs256Secret`).
public struct UserIdentityUpdate: Codable, Sendable, Equatable {
    /// True: a registration or move without a valid token is refused. False: a token that is sent
    /// is checked, and registrations without one are counted, so the switch can be prepared.
    public var required: Bool
    /// The token's `iss` must equal this.
    public var issuer: String
    /// The token's `aud` must be or contain this.
    public var audience: String
    /// A JSON Web Key Set (`{"keys": [...]}`) of public keys: EC P-256 (ES256), RSA (RS256) or
    /// OKP Ed25519 (EdDSA).
    public var jwks: JSONValue?
    /// Where the backplane fetches the key set instead: https only.
    public var jwksUrl: String?
    /// A shared secret of at least 32 bytes for HS256. Never shown again. Left out, the secret
    /// set earlier is kept; an empty string removes it.
    public var hs256Secret: String?

    public init(required: Bool, issuer: String, audience: String, jwks: JSONValue? = nil, jwksUrl: String? = nil, hs256Secret: String? = nil) {
        self.required = required
        self.issuer = issuer
        self.audience = audience
        self.jwks = jwks
        self.jwksUrl = jwksUrl
        self.hs256Secret = hs256Secret
    }
}

/// `GET /v1/admin/user-identity`, and the answer to `PUT`: the configuration without the secret.
public struct UserIdentityConfiguration: Codable, Sendable, Equatable {
    public var required: Bool
    public var issuer: String
    public var audience: String
    public var jwks: JSONValue?
    public var jwksUrl: String?
    /// Whether a shared secret is set (the secret itself is never shown).
    public var hs256SecretSet: Bool
    public var updatedAt: Date

    public init(
        required: Bool, issuer: String, audience: String, jwks: JSONValue? = nil, jwksUrl: String? = nil, hs256SecretSet: Bool,
        updatedAt: Date
    ) {
        self.required = required
        self.issuer = issuer
        self.audience = audience
        self.jwks = jwks
        self.jwksUrl = jwksUrl
        self.hs256SecretSet = hs256SecretSet
        self.updatedAt = updatedAt
    }
}

/// `GET /v1/admin/user-identity`: `configuration` is nil when the application has none (no token
/// is asked for or checked).
public struct UserIdentityResponse: Codable, Sendable, Equatable {
    public var applicationId: String
    public var configuration: UserIdentityConfiguration?

    public init(applicationId: String, configuration: UserIdentityConfiguration?) {
        self.applicationId = applicationId
        self.configuration = configuration
    }
}
