import Foundation
import JWTKit

/// The claims an app's backend puts in a user token, for tests that sign one as that backend
/// would. A claim left nil is left out of the token (to test a token without it).
public struct UserTokenClaims: JWTPayload {
    public var sub: SubjectClaim?
    public var iss: IssuerClaim?
    public var aud: AudienceClaim?
    public var exp: ExpirationClaim?
    public var iat: IssuedAtClaim?
    /// The token's id: a backplane binds a token that has one to the first device it registers.
    public var jti: IDClaim?
    /// The install the token is for; nil leaves the claim out.
    public var deviceId: String?

    /// A token for `user` from `issuer` to `audience`, issued at `issuedAt`, for `lifetime`
    /// seconds (nil: without an expiry).
    public init(user: String?, issuer: String?, audience: String?, issuedAt: Date = Date(), lifetime: TimeInterval? = 300) {
        sub = user.map(SubjectClaim.init(value:))
        iss = issuer.map(IssuerClaim.init(value:))
        aud = audience.map { AudienceClaim(value: [$0]) }
        exp = lifetime.map { ExpirationClaim(value: issuedAt.addingTimeInterval($0)) }
        iat = IssuedAtClaim(value: issuedAt)
    }

    /// Checked by the backplane, not by the tests that sign.
    public func verify(using algorithm: some JWTAlgorithm) async throws {}
}
