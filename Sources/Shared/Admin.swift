import Foundation

/// An app key as listed to admins: the secret is shown only once, when the key is created.
public struct AppKey: Codable, Sendable, Equatable {
    public var keyId: String
    public var createdAt: Date
    public var revokedAt: Date?

    public init(keyId: String, createdAt: Date, revokedAt: Date? = nil) {
        self.keyId = keyId
        self.createdAt = createdAt
        self.revokedAt = revokedAt
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
public enum TokenScope: String, Codable, Sendable, CaseIterable {
    /// Support and operations: devices, settings, keys, commands.
    case admin
    /// The content management system: feeds and episodes.
    case cms
    /// Reading the event log.
    case reporting
}

/// `GET /healthz` and `GET /readyz`.
public struct HealthStatus: Codable, Sendable, Equatable {
    public var status: String

    public init(status: String) {
        self.status = status
    }
}
