import Crypto
import Foundation
import BackplaneWire

/// Random identifiers and secrets, and the one-way hashes the store keeps of secrets.
enum Secrets {
    /// `prefix` + `byteCount` random bytes in base64url (no padding).
    static func random(prefix: String, byteCount: Int) -> String {
        // Eight bytes per draw: each draw is a system call (`getrandom`), and drawing byte by
        // byte would make one for every byte of every secret a registration draws.
        var generator = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(byteCount + 7)
        while bytes.count < byteCount {
            withUnsafeBytes(of: generator.next() as UInt64) { bytes.append(contentsOf: $0) }
        }
        return prefix + Base64URL.encode(bytes.prefix(byteCount))
    }

    static func applicationId() -> String { random(prefix: "app_", byteCount: 9) }
    static func appKeyId() -> String { random(prefix: "ak_", byteCount: 12) }
    /// Prefixed like every other credential, which also keeps it from starting with `-`: one in
    /// 32 bare base64url secrets did, and a command line then read `--secret <it>` as an option.
    static func appKeySecret() -> String { random(prefix: "aks_", byteCount: 32) }
    static func tokenId() -> String { random(prefix: "tok_", byteCount: 9) }
    static func bearerToken() -> String { random(prefix: "bpt_", byteCount: 32) }
    static func deviceCredential() -> String { random(prefix: "dc_", byteCount: 32) }
    static func grantId() -> String { random(prefix: "gr_", byteCount: 12) }
    static func entitlementKeyId() -> String { random(prefix: "ek_", byteCount: 9) }
    /// The console sign-in form's double-submit value (`ConsoleSecurity.signInCookie`).
    static func consoleSignInValue() -> String { random(prefix: "si_", byteCount: 18) }

    /// Tokens and device credentials are 256-bit random values, so a plain SHA-256 is a sound
    /// one-way hash for storing them (no salt or slow KDF is needed for non-guessable inputs).
    static func hash(_ secret: String) -> String {
        SHA256.hash(data: Data(secret.utf8)).hexString
    }
}

extension Data {
    /// Decodes lower- or upper-case hex; nil for anything else (`RequestSigning.unhex`).
    init?(hex: String) {
        guard let decoded = RequestSigning.unhex(hex) else { return nil }
        self = decoded
    }
}

extension Sequence where Element == UInt8 {
    var hexString: String { RequestSigning.hex(self) }
}

extension Digest {
    /// A digest's bytes hexed as a buffer rather than through the generic `Sequence`: every
    /// signed request hashes its body, and every device request its credential.
    var hexString: String { withUnsafeBytes { RequestSigning.hex($0) } }
}
