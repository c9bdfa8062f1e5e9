import Foundation

// What becomes of a license after the door issued it: each sync renews or ends it, the device
// releases it when the asset is deleted, and admins see it with its state.

/// `POST /v1/licenses/{licenseId}/release`: the asset was deleted on the device. Its grant then
/// holds no download, so the license counts no more against copies and limits.
public struct LicenseReleaseRequest: Codable, Sendable, Equatable {
    /// ClearKey: the key ids the device removed (its release record).
    public var kids: [String]?
    /// Widevine, PlayReady, FairPlay: the CDM's release message (proof of deletion), base64,
    /// forwarded to the license server.
    public var message: String?

    public init(kids: [String]? = nil, message: String? = nil) {
        self.kids = kids
        self.message = message
    }
}

/// The answer to a release: the license as recorded (its fields at the top level, as a
/// `License`, so that a client reading a `License` still reads it), and for a forwarded release
/// the license server's answer as it came (base64), for the CDM.
public struct LicenseReleaseResponse: Codable, Sendable, Equatable {
    public var license: License
    public var licenseServerAnswer: String?

    public init(license: License, licenseServerAnswer: String? = nil) {
        self.license = license
        self.licenseServerAnswer = licenseServerAnswer
    }

    private enum CodingKeys: String, CodingKey {
        case licenseServerAnswer
    }

    public init(from decoder: any Decoder) throws {
        license = try License(from: decoder)
        licenseServerAnswer = try decoder.container(keyedBy: CodingKeys.self).decodeIfPresent(String.self, forKey: .licenseServerAnswer)
    }

    public func encode(to encoder: any Encoder) throws {
        try license.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(licenseServerAnswer, forKey: .licenseServerAnswer)
    }
}

/// A recorded license, as admins see it.
public struct License: Codable, Sendable, Equatable {
    public var licenseId: String
    public var deviceId: String
    public var userId: String
    public var assetId: String
    public var grantId: String
    public var system: LicenseSystem
    /// Lowercase hex.
    public var kids: [String]
    public var issuedAt: Date
    public var renewedAt: Date?
    public var expiresAt: Date?
    /// When the device released it (nil while outstanding).
    public var releasedAt: Date?
    /// `outstanding`, or `released`: by the device, or because its grant ended (a wipe, a
    /// revocation, an unregistration).
    public var state: String

    public init(
        licenseId: String, deviceId: String, userId: String, assetId: String, grantId: String, system: LicenseSystem, kids: [String],
        issuedAt: Date, renewedAt: Date?, expiresAt: Date?, releasedAt: Date?, state: String
    ) {
        self.licenseId = licenseId
        self.deviceId = deviceId
        self.userId = userId
        self.assetId = assetId
        self.grantId = grantId
        self.system = system
        self.kids = kids
        self.issuedAt = issuedAt
        self.renewedAt = renewedAt
        self.expiresAt = expiresAt
        self.releasedAt = releasedAt
        self.state = state
    }
}

/// A device's licenses, newest first.
public struct LicenseList: Codable, Sendable, Equatable {
    public var licenses: [License]

    public init(licenses: [License]) {
        self.licenses = licenses
    }
}

/// A license a device holds, reported in its sync for renewal.
public struct HeldLicense: Codable, Sendable, Equatable {
    public var licenseId: String
    /// When the asset was first played (the device's trusted time), which starts the expiry
    /// after play.
    public var firstPlayedAt: Date?

    public init(licenseId: String, firstPlayedAt: Date? = nil) {
        self.licenseId = licenseId
        self.firstPlayedAt = firstPlayedAt
    }
}

/// What a sync says of a reported license.
public struct LicenseRenewal: Codable, Sendable, Equatable {
    public struct Status: WireVocabulary {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// It goes on, until `expiresAt`.
        public static let renewed = Status(rawValue: "renewed")
        /// It ends now: the device deletes its keys (`reason` says why).
        public static let ended = Status(rawValue: "ended")
        public static let allCases: [Status] = [.renewed, .ended]
    }

    public var licenseId: String
    public var status: Status
    public var expiresAt: Date?
    public var reason: LicenseDenial?

    public init(licenseId: String, status: Status, expiresAt: Date? = nil, reason: LicenseDenial? = nil) {
        self.licenseId = licenseId
        self.status = status
        self.expiresAt = expiresAt
        self.reason = reason
    }
}

extension WireLimits {
    /// Licenses one sync may report.
    public static let maxLicensesPerSync = 500
}
