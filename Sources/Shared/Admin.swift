import Foundation

/// An app key as listed to admins: the secret is shown only once, when the key is created.
public struct AppKey: Codable, Sendable, Equatable {
    public var keyId: String
    public var createdAt: Date
    public var revokedAt: Date?
    /// The last request signed with it (to within a few seconds); nil if none was.
    public var lastUsedAt: Date?

    public init(keyId: String, createdAt: Date, revokedAt: Date? = nil, lastUsedAt: Date? = nil) {
        self.keyId = keyId
        self.createdAt = createdAt
        self.revokedAt = revokedAt
        self.lastUsedAt = lastUsedAt
    }
}

/// A new app key with its secret. The backplane never shows the secret again.
public struct CreatedAppKey: Codable, Sendable, Equatable {
    public var keyId: String
    public var secret: String
    public var createdAt: Date

    public init(keyId: String, secret: String, createdAt: Date) {
        self.keyId = keyId
        self.secret = secret
        self.createdAt = createdAt
    }
}

public struct AppKeyList: Codable, Sendable, Equatable {
    public var keys: [AppKey]

    public init(keys: [AppKey]) {
        self.keys = keys
    }
}

/// `GET /v1/admin/settings` and the answer of `PATCH /v1/admin/settings`.
public struct SettingsResponse: Codable, Sendable, Equatable {
    public var applicationId: String
    public var settings: ApplicationSettings

    public init(applicationId: String, settings: ApplicationSettings) {
        self.applicationId = applicationId
        self.settings = settings
    }
}

/// The scopes a bearer token can carry.
public struct TokenScope: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Support and operations: devices, settings, keys, commands.
    public static let admin = TokenScope(rawValue: "admin")
    /// The content management system: feeds and episodes.
    public static let cms = TokenScope(rawValue: "cms")
    /// Reading the event log.
    public static let reporting = TokenScope(rawValue: "reporting")
    public static let allCases: [TokenScope] = [.admin, .cms, .reporting]
}

/// `GET /healthz` and `GET /readyz`.
public struct HealthStatus: Codable, Sendable, Equatable {
    public var status: String

    public init(status: String) {
        self.status = status
    }
}

/// A bearer token as listed: never the token itself, which is shown once, when it is created.
public struct TokenInfo: Codable, Sendable, Equatable {
    public var tokenId: String
    public var scope: TokenScope
    public var name: String
    public var createdAt: Date
    /// Nil: valid until revoked.
    public var expiresAt: Date?
    public var revokedAt: Date?
    /// The last request that carried it (to within a few seconds); nil if none did.
    public var lastUsedAt: Date?

    public init(
        tokenId: String, scope: TokenScope, name: String, createdAt: Date, expiresAt: Date? = nil, revokedAt: Date? = nil,
        lastUsedAt: Date? = nil
    ) {
        self.tokenId = tokenId
        self.scope = scope
        self.name = name
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.revokedAt = revokedAt
        self.lastUsedAt = lastUsedAt
    }
}

/// `GET /v1/admin/tokens`: oldest first, revoked and expired ones included.
public struct TokenList: Codable, Sendable, Equatable {
    public var tokens: [TokenInfo]

    public init(tokens: [TokenInfo]) {
        self.tokens = tokens
    }
}

/// `POST /v1/admin/tokens`: a token for a narrower job (`cms` or `reporting`).
public struct CreateTokenRequest: Codable, Sendable, Equatable {
    public var scope: TokenScope
    public var name: String
    /// When the token stops working; nil keeps it until it is revoked.
    public var expiresAt: Date?

    public init(scope: TokenScope, name: String, expiresAt: Date? = nil) {
        self.scope = scope
        self.name = name
        self.expiresAt = expiresAt
    }
}

/// A new token: `token` is shown only in this answer.
public struct CreatedToken: Codable, Sendable, Equatable {
    public var token: String
    public var info: TokenInfo

    public init(token: String, info: TokenInfo) {
        self.token = token
        self.info = info
    }
}
