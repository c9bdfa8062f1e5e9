import Foundation

// Content licenses: a device asks the backplane for the keys of an asset it may hold, under the
// same rules as a download permission; every license is recorded, and released when the asset
// is deleted. For ClearKey the backplane answers itself, with the keys wrapped so that only the
// asking device can open them (`ClearKeyLicense`).

/// The DRM systems a license may be asked for.
public struct LicenseSystem: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// W3C ClearKey: the backplane answers with the asset's keys, wrapped for the device.
    public static let clearKey = LicenseSystem(rawValue: "clearkey")
    public static let widevine = LicenseSystem(rawValue: "widevine")
    public static let playReady = LicenseSystem(rawValue: "playready")
    public static let fairPlay = LicenseSystem(rawValue: "fairplay")
    public static let allCases: [LicenseSystem] = [.clearKey, .widevine, .playReady, .fairPlay]
}

/// `PUT /v1/devices/{deviceId}/agreement-key`: the device's key-agreement public key, what
/// ClearKey licenses are wrapped for. A P-256 key apart from the device's signing key, so that it
/// can live where the platform keeps such keys (Secure Enclave, Android Keystore).
public struct AgreementKeyRequest: Codable, Sendable, Equatable {
    /// base64url (no padding) of the uncompressed X9.63 P-256 point (65 bytes).
    public var publicKey: String

    public init(publicKey: String) {
        self.publicKey = publicKey
    }
}

/// `POST /v1/licenses`: a license for `assetId`.
public struct LicenseIssueRequest: Codable, Sendable, Equatable {
    public var assetId: String
    public var system: LicenseSystem
    /// ClearKey: the W3C ClearKey license request, `{"kids":["<base64url key id>"],"type":"…"}`.
    /// Widevine, PlayReady, FairPlay: the CDM's challenge as it made it, base64 (a JSON string).
    public var request: LicenseChallenge
    /// The grant the license is for, when the device holds one: refused (`license_denied`,
    /// reason `grantEnded`) once that grant has ended (a wipe, a revocation, a release), rather
    /// than taking a new one. Without it, the device's grant of the asset is used, or one is made
    /// under the download rules as `POST /v1/download-grants` would.
    public var grantId: String?

    public init(assetId: String, system: LicenseSystem, request: LicenseChallenge, grantId: String? = nil) {
        self.assetId = assetId
        self.system = system
        self.request = request
        self.grantId = grantId
    }

    /// A ClearKey request.
    public init(assetId: String, system: LicenseSystem, request: ClearKeyRequest, grantId: String? = nil) {
        self.init(assetId: assetId, system: system, request: .clearKey(request), grantId: grantId)
    }
}

/// What a license request carries: a W3C ClearKey request (a JSON object), or a CDM's opaque
/// challenge (a JSON string, base64), which the backplane forwards to the application's license
/// server for the system.
public enum LicenseChallenge: Codable, Sendable, Equatable {
    case clearKey(ClearKeyRequest)
    /// The CDM's challenge (Widevine's license request, PlayReady's challenge, FairPlay's SPC).
    case opaque(Data)

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) {
            guard let bytes = Data(base64: text, bytes: WireLimits.maxLicenseChallengeBytes) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "A challenge is base64 of 1 to \(WireLimits.maxLicenseChallengeBytes) bytes.")
            }
            self = .opaque(bytes)
        } else {
            self = .clearKey(try container.decode(ClearKeyRequest.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .clearKey(let request): try container.encode(request)
        case .opaque(let bytes): try container.encode(bytes.base64EncodedString())
        }
    }
}

extension Data {
    /// `text` as base64 of 1 to `limit` bytes (a CDM's challenge or release message); nil
    /// otherwise. Its length is checked before anything is decoded.
    public init?(base64 text: String, bytes limit: Int) {
        guard text.utf8.count <= (limit + 2) / 3 * 4, let bytes = Data(base64Encoded: text), !bytes.isEmpty else { return nil }
        self = bytes
    }
}

/// The W3C ClearKey license request (EME §9.1.3).
public struct ClearKeyRequest: Codable, Sendable, Equatable {
    /// Key ids, base64url without padding.
    public var kids: [String]
    /// `temporary` or `persistent-license`.
    public var type: String?

    public init(kids: [String], type: String? = nil) {
        self.kids = kids
        self.type = type
    }
}

extension ClearKeyRequest {
    /// What is wrong with a request's key ids: the field (`kids`, `kids[2]`) and why.
    public struct Problem: Error, Equatable, Sendable {
        public var field: String
        public var message: String
    }

    /// The key ids asked for, 16 bytes each: 1 to `WireLimits.maxKeyIdsPerLicense` of them, each
    /// base64url. The backplane's door and the SDK's playback server read requests alike.
    public func keyIds() throws(Problem) -> [Data] {
        let limit = WireLimits.maxKeyIdsPerLicense
        guard (1...limit).contains(kids.count) else { throw Problem(field: "kids", message: "A license asks for 1 to \(limit) key ids.") }
        var keyIds: [Data] = []
        for (index, text) in kids.enumerated() {
            guard text.utf8.count <= 24, let kid = Base64URL.decode(text), kid.count == 16 else {
                throw Problem(field: "kids[\(index)]", message: "'kids[\(index)]' must be base64url of 16 bytes.")
            }
            keyIds.append(kid)
        }
        return keyIds
    }
}

/// How long a license lasts, in Widevine's `policy_overrides` names, so a license server
/// reads it as it is. A duration of 0 means no limit, as in Widevine.
public struct LicensePolicy: Codable, Sendable, Equatable {
    public var canPersist: Bool
    /// From issue to the end of the license.
    public var licenseDurationSeconds: Int
    /// From issue to the end of the window in which play may start.
    public var rentalDurationSeconds: Int
    /// From the first play (the expiry after play).
    public var playbackDurationSeconds: Int
    public var renewWithUsage: Bool
    /// After issue, when the device should renew (at a sync).
    public var renewalDelaySeconds: Int

    enum CodingKeys: String, CodingKey {
        case canPersist = "can_persist"
        case licenseDurationSeconds = "license_duration_seconds"
        case rentalDurationSeconds = "rental_duration_seconds"
        case playbackDurationSeconds = "playback_duration_seconds"
        case renewWithUsage = "renew_with_usage"
        case renewalDelaySeconds = "renewal_delay_seconds"
    }

    public init(
        canPersist: Bool, licenseDurationSeconds: Int, rentalDurationSeconds: Int, playbackDurationSeconds: Int, renewWithUsage: Bool,
        renewalDelaySeconds: Int
    ) {
        self.canPersist = canPersist
        self.licenseDurationSeconds = licenseDurationSeconds
        self.rentalDurationSeconds = rentalDurationSeconds
        self.playbackDurationSeconds = playbackDurationSeconds
        self.renewWithUsage = renewWithUsage
        self.renewalDelaySeconds = renewalDelaySeconds
    }
}

/// The answer to `POST /v1/licenses`.
public struct LicenseIssueResponse: Codable, Sendable, Equatable {
    public var licenseId: String
    public var grantId: String
    public var assetId: String
    public var system: LicenseSystem
    /// When the license ends unless renewed (nil: it does not end).
    public var expiresAt: Date?
    public var policy: LicensePolicy
    /// ClearKey: the keys, wrapped for the device.
    public var clearKey: ClearKeyLicense?
    /// Widevine, PlayReady, FairPlay: the license server's answer as it came, base64, for the CDM.
    public var license: String?

    public init(
        licenseId: String, grantId: String, assetId: String, system: LicenseSystem, expiresAt: Date?, policy: LicensePolicy,
        clearKey: ClearKeyLicense?, license: String? = nil
    ) {
        self.licenseId = licenseId
        self.grantId = grantId
        self.assetId = assetId
        self.system = system
        self.expiresAt = expiresAt
        self.policy = policy
        self.clearKey = clearKey
        self.license = license
    }
}

/// A W3C ClearKey license (a JWK set) whose keys are wrapped for one device: each `k` is not the
/// key but its AES-256-GCM box (nonce, ciphertext, tag; base64url), under a key derived from
/// P-256 ECDH between `epk` (the backplane's one-time key) and the device's agreement key, by
/// HKDF-SHA256 with the license id as salt and `ClearKeyLicense.wrappingInfo` followed by the
/// `epk` bytes as info; the key id's 16 bytes are authenticated with it. The device unwraps the
/// keys and hands the player a plain ClearKey license of its own.
public struct ClearKeyLicense: Codable, Sendable, Equatable {
    public struct Key: Codable, Sendable, Equatable {
        /// `oct`.
        public var kty: String
        /// The key id, base64url.
        public var kid: String
        /// The wrapped key, base64url.
        public var k: String

        public init(kty: String = "oct", kid: String, k: String) {
            self.kty = kty
            self.kid = kid
            self.k = k
        }
    }

    public var keys: [Key]
    /// `persistent-license`: the device keeps it until it ends or is released.
    public var type: String
    /// `ECDH-P256+HKDF-SHA256+A256GCM`.
    public var alg: String
    /// The backplane's one-time P-256 public key, base64url of its X9.63 point.
    public var epk: String

    public static let algorithm = "ECDH-P256+HKDF-SHA256+A256GCM"
    public static let wrappingInfo = "backplane clearkey license v1"

    public init(keys: [Key], type: String, alg: String = ClearKeyLicense.algorithm, epk: String) {
        self.keys = keys
        self.type = type
        self.alg = alg
        self.epk = epk
    }
}

/// Why a license was refused (`license_denied`, `details.reason`).
public struct LicenseDenial: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The asset has no content keys registered.
    public static let noContentKeys = LicenseDenial(rawValue: "noContentKeys")
    /// A key id asked for is not one of the asset's.
    public static let keyNotOfAsset = LicenseDenial(rawValue: "keyNotOfAsset")
    /// The grant named has ended (wiped, revoked, released, deleted).
    public static let grantEnded = LicenseDenial(rawValue: "grantEnded")
    /// The grant named is of another asset.
    public static let grantNotOfAsset = LicenseDenial(rawValue: "grantNotOfAsset")
    /// The asset's window is over (its expiry date has passed).
    public static let windowOver = LicenseDenial(rawValue: "windowOver")
    /// The device registered no agreement key to wrap ClearKey keys for.
    public static let noAgreementKey = LicenseDenial(rawValue: "noAgreementKey")
    /// The license is not one the backplane issued to this device.
    public static let unknownLicense = LicenseDenial(rawValue: "unknownLicense")
    /// No license server is configured for this system.
    public static let systemNotConfigured = LicenseDenial(rawValue: "systemNotConfigured")
    /// The application's license server refused the forwarded challenge (a 4xx;
    /// `details.licenseServerStatus` says which).
    public static let licenseServerRefused = LicenseDenial(rawValue: "licenseServerRefused")
    /// The request's form is not the system's: a ClearKey request for another system, or a
    /// challenge for ClearKey.
    public static let wrongRequestForSystem = LicenseDenial(rawValue: "wrongRequestForSystem")
    public static let allCases: [LicenseDenial] = [
        .noContentKeys, .keyNotOfAsset, .grantEnded, .grantNotOfAsset, .windowOver, .noAgreementKey, .unknownLicense, .systemNotConfigured,
        .licenseServerRefused, .wrongRequestForSystem,
    ]
}

extension WireLimits {
    /// Key ids in one license request.
    public static let maxKeyIdsPerLicense = 16
    /// Bytes of a CDM's challenge or release message (theirs are a few KiB).
    public static let maxLicenseChallengeBytes = 65_536
}
