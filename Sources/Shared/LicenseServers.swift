import Foundation

// The license servers an application configures for the DRM systems the backplane does not
// answer itself (Widevine, PlayReady, FairPlay): the backplane stays the one door, decides under
// the download rules, and forwards the device's challenge with the grant's signed entitlement and
// the policy (`ForwardedLicenseMessage`); the server's answer goes back to the device unchanged.

/// `PUT /v1/admin/license-servers/{system}`.
public struct LicenseServerRequest: Codable, Sendable, Equatable {
    /// Where the backplane posts (`http` or `https`; no redirects are followed).
    public var url: String
    /// Sent with every forward, e.g. the license server's API key. Never shown again.
    public var headers: [String: String]?

    public init(url: String, headers: [String: String]? = nil) {
        self.url = url
        self.headers = headers
    }
}

/// A configured license server, as admins see it: header names only (values may be secrets).
public struct LicenseServer: Codable, Sendable, Equatable {
    public var system: LicenseSystem
    public var url: String
    public var headerNames: [String]
    public var updatedAt: Date

    public init(system: LicenseSystem, url: String, headerNames: [String], updatedAt: Date) {
        self.system = system
        self.url = url
        self.headerNames = headerNames
        self.updatedAt = updatedAt
    }
}

/// `GET /v1/admin/license-servers`.
public struct LicenseServerList: Codable, Sendable, Equatable {
    public var licenseServers: [LicenseServer]

    public init(licenseServers: [LicenseServer]) {
        self.licenseServers = licenseServers
    }
}

/// What the backplane posts to an application's license server (`Content-Type:
/// application/json`): for a license, after the door decided under the download rules; for a
/// release, after the backplane recorded it. The server answers 200 with the bytes for the CDM
/// (any content type; returned to the device unchanged, base64), or a 4xx to refuse.
public struct ForwardedLicenseMessage: Codable, Sendable, Equatable {
    public struct Kind: WireVocabulary {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// A license request: `payload` is the CDM's challenge.
        public static let license = Kind(rawValue: "license")
        /// A release: `payload` is the CDM's release message (absent when the device sent none).
        public static let release = Kind(rawValue: "release")
        public static let allCases: [Kind] = [.license, .release]
    }

    public var kind: Kind
    public var system: LicenseSystem
    public var applicationId: String
    public var licenseId: String
    public var grantId: String
    public var assetId: String
    public var deviceId: String
    public var userId: String
    /// The CDM's bytes, base64.
    public var payload: String?
    /// A license: the grant's entitlement, a compact JWS (EdDSA) to check against
    /// `/v1/applications/{applicationId}/entitlement-keys`: its `jti` is `grantId`, and it names
    /// the device and the asset.
    public var entitlement: String?
    /// A license: how long it may last, in Widevine's `policy_overrides` names.
    public var policy: LicensePolicy?
    /// A license: when the backplane's record of it ends unless renewed.
    public var expiresAt: Date?

    public init(
        kind: Kind, system: LicenseSystem, applicationId: String, licenseId: String, grantId: String, assetId: String, deviceId: String,
        userId: String, payload: String?, entitlement: String? = nil, policy: LicensePolicy? = nil, expiresAt: Date? = nil
    ) {
        self.kind = kind
        self.system = system
        self.applicationId = applicationId
        self.licenseId = licenseId
        self.grantId = grantId
        self.assetId = assetId
        self.deviceId = deviceId
        self.userId = userId
        self.payload = payload
        self.entitlement = entitlement
        self.policy = policy
        self.expiresAt = expiresAt
    }
}

extension WireLimits {
    /// Headers an application may set for a license server, and the length of each value.
    public static let maxLicenseServerHeaders = 16
    public static let maxLicenseServerHeaderValueLength = 1024
    /// Bytes of a license server's answer the backplane reads (licenses are a few KiB).
    public static let maxLicenseServerAnswerBytes = 256 * 1024
}
