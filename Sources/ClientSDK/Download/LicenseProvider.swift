import Foundation
import BackplaneWire

/// The app's DRM licenses, handled where the download engine says when: acquired before an
/// asset's files are fetched, renewed by the expiry sweep before they end, released when the
/// asset is deleted. Clear and AES-128 content need none (`NoLicenseProvider`).
public protocol LicenseProvider: Sendable {
    /// Before the download of `asset` starts: `.acquired(until:)` (nil: a license that does not
    /// end), or `.notRequired` for content that needs none. Throwing fails this try of the download; it is tried again on the next pass through the
    /// queue (three tries in all, like any download error).
    func acquireLicense(for asset: LicenseRequest) async throws -> LicenseState
    /// The license of a downloaded asset ends within `RightsOptions.licenseRenewalLead`. Returns
    /// the new end. Throwing leaves the old one (tried again at the next sweep).
    func renewLicense(for asset: LicenseRequest) async throws -> Date?
    /// The asset was deleted (by the user, a command, autodelete, its expiry) or left the queue
    /// with its license acquired. Called once per deletion, after it.
    func releaseLicense(assetId: String) async
}

/// What a license provider is told about an asset.
public struct LicenseRequest: Sendable, Equatable {
    public var assetId: String
    public var url: URL
    public var kind: DownloadRequest.Kind
    /// The backplane's signed entitlement for this device and asset, when a permission was asked
    /// (`DownloadOptions.askPermission`): the proof a license server checks before it issues a
    /// persistent license (see docs/sdk.md). It is valid for an hour from when it was issued; a
    /// renewal gets a new one when the backplane answers (nil offline).
    public var entitlement: String?
    /// The window the asset is played in, when the backplane granted it.
    public var window: DownloadWindow?
    /// DASH: the chosen streams' `ContentProtection` (system ids, PSSH boxes, the default key
    /// id), what a Widevine or PlayReady license request is built from. Smooth Streaming: each
    /// `ProtectionHeader` in the same shape (the header in a `pssh` box for its system id, and a
    /// PlayReady header's key id). Empty for other kinds.
    public var contentProtection: [ContentProtection] = []
    /// HLS: the key ids of the playlists' `SAMPLE-AES` keys that are not files to download
    /// (`KEYFORMAT="identity"` with a `data:` URI, as Shaka Packager writes for cbcs), 16 bytes
    /// each. Empty for other kinds.
    public var keyIds: [Data] = []
    /// The backplane's grant the download holds, when a permission was asked.
    public var grantId: String?
}

extension LicenseRequest {
    /// A fresh entitlement for a grant the device holds: the backplane answers the grant again
    /// with a new token and never creates one (`DownloadPermissionRequest.grantId`). Nil offline,
    /// or when the grant has ended.
    static func freshEntitlement(
        assetId: String, grantId: String, ask: @Sendable (DownloadPermissionRequest) async throws -> DownloadPermissionResponse
    ) async -> String? {
        guard let response = try? await ask(DownloadPermissionRequest(assetId: assetId, grantId: grantId)),
              response.grant.grantId == grantId
        else { return nil }
        return response.grant.entitlement
    }
}

/// Where an asset's license is.
public enum LicenseState: Sendable, Equatable, Codable {
    /// The content needs none.
    case notRequired
    /// Acquired; it ends then (nil: never).
    case acquired(until: Date?)
    /// The last acquisition or renewal failed with this message.
    case failed(String)
    /// The backplane ended it (its grant ended, its window closed): the keys are gone, and the
    /// asset's rights are `licenseExpired`. The reason is a `LicenseDenial` value.
    case ended(reason: String)

    /// A license was acquired (and so is released when the asset goes).
    public var isAcquired: Bool {
        if case .acquired = self { return true }
        return false
    }

    /// Acquired or not needed: the download may go on.
    public var isUsable: Bool {
        switch self {
        case .failed, .ended: false
        case .notRequired, .acquired: true
        }
    }
}

/// No DRM: every call succeeds at once with no license.
public struct NoLicenseProvider: LicenseProvider {
    public init() {}
    public func acquireLicense(for asset: LicenseRequest) async throws -> LicenseState { .notRequired }
    public func renewLicense(for asset: LicenseRequest) async throws -> Date? { nil }
    public func releaseLicense(assetId: String) async {}
}
