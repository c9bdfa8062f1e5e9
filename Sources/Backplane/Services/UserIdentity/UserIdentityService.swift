import Foundation
import BackplaneWire

/// Whether a backplane fetches key sets that applications name by URL (`jwksUrl`), and what it
/// trusts for them. Off by default: the URL is a tenant's, and fetching it a request-forgery surface.
public struct UserTokenOptions: Sendable, Equatable {
    public var allowJWKSURL: Bool
    /// A PEM file of certificate authorities trusted for key-set URLs besides the system's.
    public var jwksTrustedCertificateAuthorities: URL?
    /// One deadline for a key-set fetch: connection, TLS, head and body.
    public var jwksFetchTimeout: Duration
    /// How many registrations of this node may wait for key-set fetches at once; more are
    /// answered 503 at once, so that a slow key-set host cannot hold the node's connections.
    public var maxRegistrationsWaitingForKeySets: Int

    public init(
        allowJWKSURL: Bool = false, jwksTrustedCertificateAuthorities: URL? = nil, jwksFetchTimeout: Duration = .seconds(5),
        maxRegistrationsWaitingForKeySets: Int = 64
    ) {
        self.allowJWKSURL = allowJWKSURL
        self.jwksTrustedCertificateAuthorities = jwksTrustedCertificateAuthorities
        self.jwksFetchTimeout = jwksFetchTimeout
        self.maxRegistrationsWaitingForKeySets = maxRegistrationsWaitingForKeySets
    }

    /// Registrations waiting for key sets may hold a quarter of a node's connections, and 64 at
    /// most: the rest stay free for every other request, `/healthz` and the admin API among them.
    public static func waitingLimit(maxConnections: Int) -> Int {
        min(64, max(1, maxConnections / 4))
    }
}

/// Verified users: an application's user-token configuration, and the check of the token a
/// registration carries (`UserToken`) before a device is bound to a user or moved to another.
public struct UserIdentityService: Sendable {
    let store: any BackplaneStore
    let options: UserTokenOptions
    let metrics: BackplaneMetrics
    let now: @Sendable () -> Date
    private let fetcher: JWKSFetcher
    private let inlineKeys = InlineKeyCache()

    public init(
        store: any BackplaneStore, options: UserTokenOptions = UserTokenOptions(), metrics: BackplaneMetrics = .none,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store
        self.options = options
        self.metrics = metrics
        self.now = now
        self.fetcher = JWKSFetcher(
            options: .init(
                trustedCertificateAuthorities: options.jwksTrustedCertificateAuthorities, timeout: options.jwksFetchTimeout,
                maxWaiting: options.maxRegistrationsWaitingForKeySets),
            now: now)
    }

    // MARK: configuration (admins)

    public func configuration(applicationId: String) async throws -> UserIdentityResponse {
        let record = try await store.userIdentity(applicationId: applicationId)
        return UserIdentityResponse(applicationId: applicationId, configuration: record.map(Self.wire))
    }

    /// Replaces the configuration after checking every part of it; nothing changes when a part
    /// is refused. A secret left out is kept; an empty one is removed.
    public func set(applicationId: String, _ update: UserIdentityUpdate, byOperator: Bool = false) async throws -> UserIdentityConfiguration {
        try Validate.text(update.issuer, field: "issuer", maxLength: 512)
        try Validate.text(update.audience, field: "audience", maxLength: 512)
        if update.jwks != nil, update.jwksUrl != nil {
            throw ServiceError.validation("Give either 'jwks' or 'jwksUrl', not both.", field: "jwksUrl")
        }
        if let url = update.jwksUrl { try checkURL(url, byOperator: byOperator) }
        if let secret = update.hs256Secret, !secret.isEmpty {
            guard (UserTokenKeys.minimumSecretBytes...UserTokenKeys.maximumSecretBytes).contains(secret.utf8.count) else {
                throw ServiceError.validation(
                    "'hs256Secret' must be \(UserTokenKeys.minimumSecretBytes) to \(UserTokenKeys.maximumSecretBytes) bytes.", field: "hs256Secret")
            }
        }
        // Refuses any key it could not check a token with.
        _ = try await UserTokenKeys.make(jwks: update.jwks, secret: nil, strict: true)
        let jwks = try update.jwks.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
        let stored = try await store.userIdentity(applicationId: applicationId)
        let secret: String? = switch update.hs256Secret {
        case .none: stored?.hs256Secret
        case .some(let secret): secret.isEmpty ? nil : secret
        }
        guard jwks != nil || update.jwksUrl != nil || secret != nil else {
            throw ServiceError.validation("Give the keys tokens are checked with: 'jwks', 'jwksUrl' or 'hs256Secret'.", field: "jwks")
        }
        let record = UserIdentityRecord(
            applicationId: applicationId, required: update.required, issuer: update.issuer, audience: update.audience, jwks: jwks,
            jwksUrl: update.jwksUrl, hs256Secret: secret, updatedAt: now())
        try await store.setUserIdentity(record)
        return Self.wire(record)
    }

    /// 404 when the application has none. Registrations need no token from then on.
    public func delete(applicationId: String) async throws {
        guard try await store.deleteUserIdentity(applicationId: applicationId) else {
            throw ServiceError.notFound("The application has no user identity configuration.")
        }
    }

    private func checkURL(_ text: String, byOperator: Bool) throws {
        guard options.allowJWKSURL || byOperator else {
            throw ServiceError(.forbidden,
                "This backplane does not fetch key sets by URL: its operator turns that on with 'serve --allow-jwks-url'. Give the keys inline ('jwks').",
                details: ["field": .string("jwksUrl")])
        }
        try Validate.text(text, field: "jwksUrl", maxLength: WireLimits.maxURLLength)
        guard let components = URLComponents(string: text), components.scheme?.lowercased() == "https",
            let host = components.host, !host.isEmpty, components.user == nil, components.password == nil
        else {
            throw ServiceError.validation("'jwksUrl' must be an https URL with a host (and no user name or password).", field: "jwksUrl")
        }
    }

    static func wire(_ record: UserIdentityRecord) -> UserIdentityConfiguration {
        UserIdentityConfiguration(
            required: record.required, issuer: record.issuer, audience: record.audience,
            jwks: record.jwks.flatMap { try? JSONDecoder().decode(JSONValue.self, from: Data($0.utf8)) },
            jwksUrl: record.jwksUrl, hs256SecretSet: record.hs256Secret != nil, updatedAt: record.updatedAt)
    }

    // MARK: the check

    /// What a registration's token proved.
    public enum Verdict: Sendable, Equatable {
        /// A valid token for the user.
        case verified
        /// No token, and none is required (or the application checks none).
        case notRequired
        /// No token, where one is required: only a device already bound to this user, proving
        /// it is that install, may go on (it binds nothing new).
        case missing
    }

    /// Checks `token` (the `X-Backplane-User-Token` header) for binding device `deviceId` to
    /// `userId`. A token that is sent is checked whether or not tokens are required: 401
    /// `user_token_invalid` or 403 `user_token_mismatch`, before anything else is stored. A
    /// valid token with a `jti` is then bound to this device for its lifetime: the same
    /// registration again passes (a retry), another device is refused (`user_token_invalid`,
    /// details `reason: reused`), so a leaked token registers one device, not the user's every slot.
    func check(applicationId: String, userId: String, deviceId: String, token: String?) async throws -> Verdict {
        guard let record = try await store.userIdentity(applicationId: applicationId) else { return .notRequired }
        guard let token, !token.isEmpty else {
            metrics.count(.absent)
            return record.required ? .missing : .notRequired
        }
        do {
            try await verify(token, userId: userId, deviceId: deviceId, record: record)
            metrics.count(.verified)
            return .verified
        } catch {
            metrics.count(.refused)
            throw error
        }
    }

    private func verify(_ token: String, userId: String, deviceId: String, record: UserIdentityRecord) async throws {
        let (algorithm, kid) = try UserTokenCheck.header(of: token)
        let check = UserTokenCheck(issuer: record.issuer, audience: record.audience, now: now())
        var keys = try await inlineKeys.keys(for: record)
        if let url = record.jwksUrl, algorithm != "HS256" {
            try check.precheck(token, userId: userId, deviceId: deviceId)
            keys.keys = try await fetchedKeys(url, missingKid: nil).keys
            if let kid, !keys.hasKey(id: kid) {
                // A key rotated in since the last fetch.
                keys.keys = try await fetchedKeys(url, missingKid: kid).keys
            }
        }
        guard let key = try UserTokenCheck.key(in: keys, algorithm: algorithm, kid: kid) else {
            throw UserTokenCheck.invalid("the application has no key '\(kid?.prefix(64) ?? "")'.")
        }
        let claims = try await check.verify(token, with: key, userId: userId, deviceId: deviceId)
        if let tokenId = claims.jti?.value, let expiry = claims.exp?.value {
            let bound = try await store.bindUserToken(
                applicationId: record.applicationId, tokenId: tokenId, deviceId: deviceId,
                expiresAt: expiry.addingTimeInterval(UserToken.leeway), now: now())
            guard bound == deviceId else {
                throw ServiceError(.userTokenInvalid,
                    "The user token was refused: it already registered another device, and a token registers one. Ask the app's backend for a new token.",
                    details: ["reason": .string("reused")])
            }
        }
    }

    private func fetchedKeys(_ url: String, missingKid: String?) async throws -> UserTokenKeys {
        guard options.allowJWKSURL else {
            throw ServiceError(.serviceUnavailable,
                "The application's keys are at a URL, and this backplane does not fetch key sets by URL ('serve --allow-jwks-url').")
        }
        return try await fetcher.keys(at: url, missingKid: missingKid)
    }
}

/// The inline keys and the secret, made once per stored configuration: building jwt-kit's
/// verifiers parses every key.
private actor InlineKeyCache {
    private var entries: [String: (record: UserIdentityRecord, keys: UserTokenKeys)] = [:]

    func keys(for record: UserIdentityRecord) async throws -> UserTokenKeys {
        if let entry = entries[record.applicationId], entry.record == record { return entry.keys }
        let jwks = try record.jwks.map { try JSONDecoder().decode(JSONValue.self, from: Data($0.utf8)) }
        let keys = try await UserTokenKeys.make(jwks: jwks, secret: record.hs256Secret, strict: false)
        entries[record.applicationId] = (record, keys)
        return keys
    }
}
