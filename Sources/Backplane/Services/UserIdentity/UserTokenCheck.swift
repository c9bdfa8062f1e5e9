import Foundation
import JWTKit
import BackplaneWire

/// Checks one user token against an application's configuration: the header's algorithm
/// against the key it names, the signature (jwt-kit), then the claims. Every refusal is
/// `user_token_invalid` with a message that says which check failed and never repeats the
/// token; a valid token for another user is `user_token_mismatch`.
struct UserTokenCheck: Sendable {
    let issuer: String
    let audience: String
    let now: Date

    /// The header members read before the signature is checked.
    private struct Header: Decodable {
        var alg: String?
        var kid: String?
        var crit: [String]?
    }

    /// The claims read once the signature holds; checked here rather than by jwt-kit so that
    /// each refusal can say what was wrong.
    struct Claims: JWTPayload {
        var sub: SubjectClaim?
        var iss: IssuerClaim?
        var aud: AudienceClaim?
        var exp: ExpirationClaim?
        var nbf: NotBeforeClaim?
        var iat: IssuedAtClaim?
        var jti: IDClaim?
        var deviceId: String?

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// A date from a token, which may be any number: ISO 8601 inside the dates the wire takes.
    private static func text(_ date: Date) -> String {
        WireLimits.acceptedDates.contains(date) ? date.formatted(.iso8601) : "\(date.timeIntervalSince1970) s after 1970"
    }

    static func invalid(_ message: String) -> ServiceError {
        ServiceError(.userTokenInvalid, "The user token was refused: \(message)")
    }

    /// What the token's header asks for: its algorithm and key id. Refuses `none` and every
    /// algorithm not accepted, before any key is looked at.
    static func header(of token: String) throws -> (algorithm: String, kid: String?) {
        guard token.utf8.count <= UserToken.maxLength else {
            throw invalid("it is longer than \(UserToken.maxLength) bytes.")
        }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(String(parts[0])),
            let header = try? JSONDecoder().decode(Header.self, from: headerBytes)
        else { throw invalid("it is not a signed JWT (three base64url parts, the first a JSON header).") }
        guard let algorithm = header.alg else { throw invalid("its header names no algorithm ('alg').") }
        guard algorithm.lowercased() != "none" else { throw invalid("algorithm 'none' (an unsigned token) is never accepted.") }
        guard UserToken.acceptedAlgorithms.contains(algorithm) else {
            throw invalid("algorithm '\(algorithm.prefix(20))' is not accepted; use ES256, RS256, EdDSA, or HS256 with a shared secret.")
        }
        if let critical = header.crit, !critical.isEmpty {
            throw invalid("its header has critical parameters ('crit'), which this backplane does not understand.")
        }
        return (algorithm, header.kid)
    }

    /// The key `keys` holds for the token's algorithm and kid; nil when the kid is unknown (the
    /// caller may fetch the key set again). Refuses a key of another algorithm than the header's.
    static func key(in keys: UserTokenKeys, algorithm: String, kid: String?) throws -> UserTokenKeys.Key? {
        if algorithm == "HS256", keys.secret == nil {
            throw invalid("HS256 is accepted only where the application set a shared secret; this application checks tokens with public keys.")
        }
        let candidates = keys.candidates(algorithm: algorithm, kid: kid)
        if kid != nil, algorithm != "HS256" {
            guard let key = candidates.first else { return nil }
            guard key.algorithm == algorithm else {
                throw invalid("its header says \(algorithm), but key '\(kid!.prefix(64))' is an \(key.algorithm) key.")
            }
            return key
        }
        guard candidates.count == 1 else {
            throw invalid(candidates.isEmpty
                ? "the application has no \(algorithm) key."
                : "it names no key ('kid') and the application has several \(algorithm) keys.")
        }
        return candidates[0]
    }

    /// The claims as the token states them, before its signature is checked: a token whose
    /// claims would be refused anyway is refused without fetching a key set for it. Nothing is
    /// trusted from here; the same check runs again on the verified claims.
    func precheck(_ token: String, userId: String, deviceId: String) throws {
        let claims: Claims
        do {
            claims = try DefaultJWTParser().parse(Array(token.utf8), as: Claims.self).payload
        } catch {
            throw Self.invalid("its claims could not be read (the claims must be a JSON object with standard types).")
        }
        try check(claims, userId: userId, deviceId: deviceId)
    }

    /// The signature with `key`, then the claims. `userId` and `deviceId` are the user and the
    /// device the request binds. The verified claims, for what the caller keeps of them (`jti`).
    @discardableResult
    func verify(_ token: String, with key: UserTokenKeys.Key, userId: String, deviceId: String) async throws -> Claims {
        let claims: Claims
        do {
            claims = try await key.verifier.verify(token, as: Claims.self)
        } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
            throw Self.invalid("its signature does not verify with the application's \(key.algorithm) key\(key.id.map { " '\($0.prefix(64))'" } ?? "").")
        } catch {
            throw Self.invalid("its signature or claims could not be read (the claims must be a JSON object with standard types).")
        }
        try check(claims, userId: userId, deviceId: deviceId)
        return claims
    }

    func check(_ claims: Claims, userId: String, deviceId: String) throws {
        let leeway = UserToken.leeway
        guard let expiry = claims.exp?.value else { throw Self.invalid("it has no expiry ('exp'); user tokens must expire.") }
        guard expiry.timeIntervalSince(now) >= -leeway else {
            throw Self.invalid("it expired at \(Self.text(expiry)).")
        }
        if let notBefore = claims.nbf?.value, notBefore.timeIntervalSince(now) > leeway {
            throw Self.invalid("it is not valid before \(Self.text(notBefore)) ('nbf').")
        }
        if let issuedAt = claims.iat?.value, issuedAt.timeIntervalSince(now) > leeway {
            throw Self.invalid("it was issued in the future ('iat' \(Self.text(issuedAt))).")
        }
        let lifetime = expiry.timeIntervalSince(claims.iat?.value ?? now)
        guard lifetime <= UserToken.maxLifetime + leeway else {
            throw Self.invalid("it is valid for longer than \(Int(UserToken.maxLifetime / 3600)) hours; issue tokens of minutes.")
        }
        guard claims.iss?.value == issuer else { throw Self.invalid("its issuer ('iss') is not the application's issuer '\(issuer)'.") }
        guard claims.aud?.value.contains(audience) == true else {
            throw Self.invalid("its audience ('aud') does not include the application's audience '\(audience)'.")
        }
        guard let subject = claims.sub?.value, !subject.isEmpty else { throw Self.invalid("it names no user ('sub').") }
        guard subject == userId else {
            throw ServiceError(.userTokenMismatch,
                "The user token is for another user than '\(userId)': its subject ('sub') must be the request's userId.",
                details: ["field": .string("userId")])
        }
        if let bound = claims.deviceId, bound != deviceId {
            throw ServiceError(.userTokenMismatch,
                "The user token is for another device than '\(deviceId)': its '\(UserToken.deviceIdClaim)' claim must be the request's deviceId.",
                details: ["field": .string("deviceId")])
        }
        if let tokenId = claims.jti?.value, tokenId.isEmpty || tokenId.utf8.count > UserToken.maxTokenIdLength {
            throw Self.invalid("its token id ('jti') must be 1 to \(UserToken.maxTokenIdLength) bytes.")
        }
    }
}
