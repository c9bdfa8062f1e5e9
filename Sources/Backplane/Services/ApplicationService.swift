import Foundation
import BackplaneWire

/// Applications (tenants), their app keys, bearer tokens and settings.
public struct ApplicationService: Sendable {
    public let store: any BackplaneStore
    let wakeUps: (any WakeUpPublisher)?
    /// Uses noted by this server and not yet written; nil for offline administration.
    let credentialUse: CredentialUseLog?

    /// `wakeUps` is nil for offline administration (the CLI): no device channel lives there.
    public init(store: any BackplaneStore, wakeUps: (any WakeUpPublisher)? = nil, credentialUse: CredentialUseLog? = nil) {
        self.store = store
        self.wakeUps = wakeUps
        self.credentialUse = credentialUse
    }

    /// A new application with default settings and one app key. The secret is returned once.
    public func createApplication(name: String, now: Date = Date()) async throws -> (ApplicationRecord, CreatedAppKey) {
        try Validate.text(name, field: "name", maxLength: WireLimits.maxApplicationNameLength)
        let application = ApplicationRecord(id: Secrets.applicationId(), name: name, settings: .defaults, createdAt: now)
        let key = AppKeyRecord(keyId: Secrets.appKeyId(), applicationId: application.id, secret: Secrets.appKeySecret(), createdAt: now)
        try await store.createApplication(application, key: key)
        return (application, CreatedAppKey(keyId: key.keyId, secret: key.secret, createdAt: now))
    }

    public func applications() async throws -> [ApplicationRecord] {
        try await store.applications()
    }

    public func exists(applicationId: String) async throws -> Bool {
        try await store.application(id: applicationId) != nil
    }

    public func settings(applicationId: String) async throws -> ApplicationSettings {
        guard let application = try await store.application(id: applicationId) else {
            throw ServiceError.notFound("No application with id '\(applicationId)'.")
        }
        return application.settings
    }

    /// Applies a partial update after validating the result; nothing changes when it is invalid.
    public func updateSettings(applicationId: String, _ update: ApplicationSettingsUpdate) async throws -> ApplicationSettings {
        let updated = try await store.updateSettings(applicationId: applicationId) { current in
            let next = update.applied(to: current)
            try Validate.settings(next)
            return next
        }
        guard let updated else { throw ServiceError.notFound("No application with id '\(applicationId)'.") }
        wakeUps?.publish(.application(applicationId: applicationId))
        return updated
    }

    // MARK: app keys (rotation: add a key, ship it, then revoke the old one)

    public func appKeys(applicationId: String) async throws -> [AppKey] {
        let read = { try await self.store.appKeys(applicationId: applicationId) }
        guard let credentialUse else { return try await read().map(\.wire) }
        return try await credentialUse.latest(read).map(\.wire)
    }

    public func addAppKey(applicationId: String, now: Date = Date()) async throws -> CreatedAppKey {
        let key = AppKeyRecord(keyId: Secrets.appKeyId(), applicationId: applicationId, secret: Secrets.appKeySecret(), createdAt: now)
        try await store.addAppKey(key)
        return CreatedAppKey(keyId: key.keyId, secret: key.secret, createdAt: now)
    }

    /// Revokes a key; the last unrevoked key of an application cannot be revoked (409), since
    /// that would lock every device out.
    public func revokeAppKey(applicationId: String, keyId: String, now: Date = Date()) async throws -> AppKey {
        let revoked = try await store.revokeAppKey(applicationId: applicationId, keyId: keyId, at: now) { active in
            guard active.contains(where: { $0.keyId != keyId }) else {
                throw ServiceError.conflict("'\(keyId)' is the application's only active key; add a new key before revoking it.")
            }
        }
        guard let revoked else { throw ServiceError.notFound("No app key '\(keyId)' in this application.") }
        return revoked.wire
    }

    // MARK: first run

    public struct FirstRunCredentials: Sendable {
        public var application: ApplicationRecord
        public var key: CreatedAppKey
        public var adminToken: String
    }

    /// On an empty database, creates an application named "default" with an admin token, so a
    /// fresh `serve` is usable at once. Nil when any application exists.
    public func bootstrapIfEmpty() async throws -> FirstRunCredentials? {
        guard try await store.applications().isEmpty else { return nil }
        let (application, key) = try await createApplication(name: "default")
        let token = try await createToken(applicationId: application.id, scope: .admin, name: "first-run admin")
        return FirstRunCredentials(application: application, key: key, adminToken: token)
    }
}

extension AppKeyRecord {
    var wire: AppKey { AppKey(keyId: keyId, createdAt: createdAt, revokedAt: revokedAt, lastUsedAt: lastUsedAt) }
}
