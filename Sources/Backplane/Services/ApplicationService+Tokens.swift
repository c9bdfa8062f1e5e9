import Foundation
import BackplaneWire

/// Bearer tokens: created with one scope and shown once, listed without the token, revoked at
/// once. Only a token's SHA-256 is stored.
extension ApplicationService {
    /// The longest lifetime a token may be given: long-lived credentials belong in a rotation.
    static let maxTokenLifetime: TimeInterval = 10 * 365 * 86400

    /// A new token; `expiresAt` nil keeps it until it is revoked.
    public func issueToken(
        applicationId: String, scope: TokenScope, name: String, expiresAt: Date? = nil, now: Date = Date()
    ) async throws -> CreatedToken {
        try Validate.text(name, field: "name", maxLength: WireLimits.maxApplicationNameLength)
        if let expiresAt {
            try Validate.date(expiresAt, field: "expiresAt")
            guard expiresAt > now, expiresAt.timeIntervalSince(now) <= Self.maxTokenLifetime else {
                throw ServiceError.validation("'expiresAt' must be in the future and at most ten years away.", field: "expiresAt")
            }
        }
        guard try await store.application(id: applicationId) != nil else {
            throw ServiceError.notFound("No application with id '\(applicationId)'.")
        }
        let token = Secrets.bearerToken()
        let record = TokenRecord(
            id: Secrets.tokenId(), applicationId: applicationId, scope: scope, tokenHash: Secrets.hash(token), name: name, createdAt: now,
            expiresAt: expiresAt)
        try await store.createToken(record)
        return CreatedToken(token: token, info: record.wire)
    }

    /// `issueToken`'s token alone, for the command line and the first run.
    public func createToken(
        applicationId: String, scope: TokenScope, name: String, expiresAt: Date? = nil, now: Date = Date()
    ) async throws -> String {
        try await issueToken(applicationId: applicationId, scope: scope, name: name, expiresAt: expiresAt, now: now).token
    }

    public func tokens(applicationId: String) async throws -> [TokenInfo] {
        let read = { try await self.store.tokens(applicationId: applicationId) }
        guard let credentialUse else { return try await read().map(\.wire) }
        return try await credentialUse.latest(read).map(\.wire)
    }

    /// The live token record of a presented bearer token, its use noted: the check behind every
    /// token-authenticated request, API and console alike. Read on every request, not cached, so
    /// a revocation takes effect at once, on every node.
    public func authenticate(bearer token: String, now: Date = Date()) async throws -> TokenRecord {
        guard let record = try await store.token(hash: Secrets.hash(token)), record.revokedAt == nil else {
            throw ServiceError.invalidCredentials("Unknown or revoked bearer token.")
        }
        if let expiresAt = record.expiresAt, expiresAt <= now {
            throw ServiceError.invalidCredentials("This bearer token expired at \(expiresAt.formatted(.iso8601)).")
        }
        credentialUse?.usedToken(record.id, at: now)
        return record
    }

    /// Revokes a token; it is refused from the next request on, on every node. Revoking a revoked
    /// token changes nothing.
    public func revokeToken(applicationId: String, tokenId: String, now: Date = Date()) async throws -> TokenInfo {
        try Validate.identifier(tokenId, field: "tokenId")
        guard let revoked = try await store.revokeToken(applicationId: applicationId, tokenId: tokenId, at: now) else {
            throw ServiceError.notFound("No token '\(tokenId)' in this application.")
        }
        return revoked.wire
    }
}

extension TokenRecord {
    var wire: TokenInfo {
        TokenInfo(
            tokenId: id, scope: scope, name: name, createdAt: createdAt, expiresAt: expiresAt, revokedAt: revokedAt, lastUsedAt: lastUsedAt)
    }
}
