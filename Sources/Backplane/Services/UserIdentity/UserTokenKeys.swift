import Foundation
import JWTKit
import BackplaneWire

/// The keys one application's user tokens are checked with: its JSON Web Key Set (inline or
/// fetched) and its shared secret. Each key is held with the one algorithm it may verify, so a
/// token cannot choose another (an RSA key's bytes taken as an HMAC secret, say).
struct UserTokenKeys: Sendable {
    struct Key: Sendable {
        /// The JWK's `kid`, when it has one.
        var id: String?
        /// `ES256`, `RS256`, `EdDSA` or `HS256`.
        var algorithm: String
        /// jwt-kit's verifier for this key alone (its default signer).
        var verifier: JWTKeyCollection
    }

    var keys: [Key]
    var secret: Key?

    static let maxKeys = 32
    /// A shared secret of fewer bytes is refused: RFC 7518 §3.2 asks for at least the hash's size.
    static let minimumSecretBytes = 32
    static let maximumSecretBytes = 512

    /// The keys that may verify a token signed with `algorithm`, naming key `kid` (or none).
    func candidates(algorithm: String, kid: String?) -> [Key] {
        if algorithm == "HS256" { return secret.map { [$0] } ?? [] }
        if let kid { return keys.filter { $0.id == kid } }
        return keys.filter { $0.algorithm == algorithm }
    }

    func hasKey(id: String) -> Bool { keys.contains { $0.id == id } }

    /// An application's keys. `strict` (an admin's configuration) refuses any key it cannot use;
    /// otherwise (a fetched key set, which may publish keys for other uses) such keys are left out.
    static func make(jwks: JSONValue?, secret: String?, strict: Bool) async throws -> UserTokenKeys {
        var keys: [Key] = []
        if let jwks {
            guard case .object(let set) = jwks, case .array(let entries)? = set["keys"] else {
                throw ServiceError.validation("'jwks' must be a JSON Web Key Set: an object with a 'keys' array.", field: "jwks")
            }
            guard entries.count <= maxKeys else {
                throw ServiceError.validation("'jwks' holds \(entries.count) keys; at most \(maxKeys) are taken.", field: "jwks")
            }
            for (index, entry) in entries.enumerated() {
                do {
                    keys.append(try await key(entry))
                } catch let problem as KeyProblem {
                    if strict { throw ServiceError.validation("'jwks.keys[\(index)]': \(problem.message)", field: "jwks") }
                }
            }
            let ids = keys.compactMap(\.id)
            if strict, Set(ids).count != ids.count {
                throw ServiceError.validation("Two keys of 'jwks' have the same 'kid'.", field: "jwks")
            }
        }
        var secretKey: Key?
        if let secret {
            let verifier = JWTKeyCollection()
            await verifier.add(hmac: HMACKey(from: Data(secret.utf8)), digestAlgorithm: .sha256)
            secretKey = Key(id: nil, algorithm: "HS256", verifier: verifier)
        }
        return UserTokenKeys(keys: keys, secret: secretKey)
    }

    private struct KeyProblem: Error {
        var message: String
    }

    /// The members of a public JWK this backplane reads (RFC 7517, 7518, 8037).
    private struct PublicJWK: Decodable {
        var kty: String?
        var crv: String?
        var alg: String?
        var use: String?
        var kid: String?
        var x: String?
        var y: String?
        var n: String?
        var e: String?
        var d: String?
    }

    private static func key(_ entry: JSONValue) async throws -> Key {
        let jwk: PublicJWK
        do {
            jwk = try JSONDecoder().decode(PublicJWK.self, from: try JSONEncoder().encode(entry))
        } catch {
            throw KeyProblem(message: "not a JSON Web Key (an object whose members are strings).")
        }
        guard jwk.d == nil else {
            throw KeyProblem(message: "holds a private key ('d'); publish only the public part.")
        }
        if let kid = jwk.kid, kid.isEmpty || kid.utf8.count > 256 { throw KeyProblem(message: "'kid' must be 1 to 256 bytes.") }
        if let use = jwk.use, use != "sig" { throw KeyProblem(message: "is for '\(use)', not for signatures ('sig').") }
        let verifier = JWTKeyCollection()
        let algorithm: String
        do {
            switch (jwk.kty, jwk.crv) {
            case ("EC", "P-256"):
                algorithm = "ES256"
                guard let x = jwk.x, let y = jwk.y else { throw KeyProblem(message: "an EC key needs 'x' and 'y'.") }
                await verifier.add(ecdsa: try ES256PublicKey(parameters: (x: x, y: y)))
            case ("RSA", _):
                algorithm = "RS256"
                guard let n = jwk.n, let e = jwk.e else { throw KeyProblem(message: "an RSA key needs 'n' and 'e'.") }
                await verifier.add(rsa: try Insecure.RSA.PublicKey(modulus: n, exponent: e), digestAlgorithm: .sha256)
            case ("OKP", "Ed25519"):
                algorithm = "EdDSA"
                guard let x = jwk.x else { throw KeyProblem(message: "an Ed25519 key needs 'x'.") }
                await verifier.add(eddsa: try EdDSA.PublicKey(x: x, curve: .ed25519))
            default:
                throw KeyProblem(message: "kty '\(jwk.kty ?? "")' with crv '\(jwk.crv ?? "")' is not taken: use EC P-256 (ES256), RSA (RS256) or OKP Ed25519 (EdDSA).")
            }
        } catch let problem as KeyProblem {
            throw problem
        } catch {
            throw KeyProblem(message: "is not a valid \(jwk.kty ?? "") public key (RSA keys need at least 2048 bits).")
        }
        if let alg = jwk.alg, alg != algorithm {
            throw KeyProblem(message: "says 'alg' \(alg), but a key of its type is taken for \(algorithm) only.")
        }
        return Key(id: jwk.kid, algorithm: algorithm, verifier: verifier)
    }
}
