import Backplane
import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import BackplaneWire
import Testing
import TestSupport

/// The app's backend in the user-token tests: its signing keys, its JWKS, the tokens it issues.
struct TokenIssuer: Sendable {
    static let issuer = "https://accounts.example.com"
    static let audience = "backplane-tests"

    let es256 = P256.Signing.PrivateKey()
    let ed25519 = Curve25519.Signing.PrivateKey()
    let secret = "a shared secret of more than thirty-two bytes"
    var es256Kid = "es-1"
    var edKid = "ed-1"

    static func claims(
        user: String?, issuer: String? = TokenIssuer.issuer, audience: String? = TokenIssuer.audience, now: Date = Date(),
        lifetime: TimeInterval? = 300
    ) -> UserTokenClaims {
        UserTokenClaims(user: user, issuer: issuer, audience: audience, issuedAt: now, lifetime: lifetime)
    }

    /// The public keys as a JSON Web Key Set.
    func jwks(includingEdDSA: Bool = true) -> JSONValue {
        let point = es256.publicKey.x963Representation
        var keys: [JSONValue] = [.object([
            "kty": .string("EC"), "crv": .string("P-256"), "kid": .string(es256Kid), "use": .string("sig"), "alg": .string("ES256"),
            "x": .string(Base64URL.encode(point[1..<33])), "y": .string(Base64URL.encode(point[33..<65])),
        ])]
        if includingEdDSA {
            keys.append(.object([
                "kty": .string("OKP"), "crv": .string("Ed25519"), "kid": .string(edKid),
                "x": .string(Base64URL.encode(ed25519.publicKey.rawRepresentation)),
            ]))
        }
        return .object(["keys": .array(keys)])
    }

    func es256Token(_ claims: UserTokenClaims, kid: String? = nil, key: P256.Signing.PrivateKey? = nil) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PrivateKey(backing: key ?? es256), kid: JWKIdentifier(string: kid ?? es256Kid))
        return try await keys.sign(claims, kid: JWKIdentifier(string: kid ?? es256Kid))
    }

    func edToken(_ claims: UserTokenClaims) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(eddsa: EdDSA.PrivateKey(backing: ed25519), kid: JWKIdentifier(string: edKid))
        return try await keys.sign(claims, kid: JWKIdentifier(string: edKid))
    }

    /// HS256 with `secret`: the application's shared secret, or (an attack) a public key's bytes.
    func hs256Token(_ claims: UserTokenClaims, secret: String? = nil, kid: String? = nil) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: Data((secret ?? self.secret).utf8)), digestAlgorithm: .sha256, kid: kid.map(JWKIdentifier.init(string:)))
        return try await keys.sign(claims, kid: kid.map(JWKIdentifier.init(string:)))
    }

    /// An unsigned token (`alg: none`), which no configuration may accept.
    static func unsignedToken(_ claims: UserTokenClaims) throws -> String {
        let header = Base64URL.encode(Data(#"{"alg":"none","typ":"JWT"}"#.utf8))
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        return "\(header).\(Base64URL.encode(try encoder.encode(claims)))."
    }

    /// The configuration an admin would PUT for these keys.
    func configuration(required: Bool = true, jwksUrl: String? = nil, withSecret: Bool = false) -> UserIdentityUpdate {
        UserIdentityUpdate(
            required: required, issuer: Self.issuer, audience: Self.audience, jwks: jwksUrl == nil ? jwks() : nil, jwksUrl: jwksUrl,
            hs256Secret: withSecret ? secret : nil)
    }
}

extension Client {
    /// A registration carrying `token` in `X-Backplane-User-Token` (none when nil), proven by the
    /// install's device key.
    func register(
        user: String, device: String, token: String?, move: Bool? = nil
    ) async throws -> TestResponse {
        let key = fixture.deviceKeys.key(for: device)
        let body = try Self.encode(RegisterDeviceRequest(
            userId: user, deviceId: device, platform: "linux", moveFromOtherUser: move, devicePublicKey: DeviceKeys.publicKey(key)))
        var headers = fixture.signer.headers(method: .post, path: "/v1/devices/register", body: body, proofKey: key)
        if let token { headers[HTTPField.Name(UserToken.header)!] = token }
        return try await raw(.post, "/v1/devices/register", headers: headers, body: body)
    }

    func setUserIdentity(_ update: UserIdentityUpdate) async throws -> TestResponse {
        try await admin(.put, "/v1/admin/user-identity", json: update)
    }
}

extension TestResponse {
    /// The device a successful registration answered, as an identity for its next requests.
    func identity() throws -> DeviceIdentity {
        let body = try decode(RegisterDeviceResponse.self)
        return DeviceIdentity(deviceId: body.device.deviceId, credential: body.deviceCredential)
    }

    var errorMessage: String { (try? decode(ErrorBody.self))?.error.message ?? text }
}
