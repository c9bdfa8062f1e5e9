import Foundation
import BackplaneWire

/// Content licenses: issued in the transaction that checks the download rules (and records the
/// grant they make), released with the grant they hold, and the devices' agreement keys they are
/// wrapped for.
public protocol LicenseStore: Sendable {
    /// Sets the device's agreement key; false when there is no such registered device.
    func setAgreementKey(applicationId: String, deviceId: String, publicKey: Data, at: Date) async throws -> Bool
    /// One transaction: reads what `POST /v1/download-grants` reads (`DownloadPermissionState`),
    /// the grant named `grantId` (if any), the newest unreleased license of the held grant, the
    /// asset's content keys and the device's agreement key; asks `decide`; and inserts the grant
    /// and the license it returns, if any (none: nothing is written). Throws
    /// `StoreError.unknownDevice` when there is no such device.
    func issueLicense<Decision: Sendable>(
        applicationId: String, deviceId: String, assetId: String, grantId: String?,
        decide: @escaping @Sendable (LicenseDoorState) throws -> (LicenseIssue?, Decision)
    ) async throws -> Decision
    /// One transaction: reads the device's license `licenseId` (nil if it is not the device's)
    /// and its grant, asks `decide`, and writes the license and the grant it returns.
    func releaseLicense<Decision: Sendable>(
        applicationId: String, deviceId: String, licenseId: String,
        decide: @escaping @Sendable (LicenseRecord?, DownloadGrantRecord?) throws -> (LicenseRecord?, DownloadGrantRecord?, Decision)
    ) async throws -> Decision
    /// One transaction: reads the device's licenses among `licenseIds` with their grants (a
    /// license that is not the device's is absent), asks `decide`, and writes the renewals it
    /// returns (`renewedAt`, `expiresAt`).
    func renewLicenses<Decision: Sendable>(
        applicationId: String, deviceId: String, licenseIds: [String],
        decide: @escaping @Sendable ([(license: LicenseRecord, grant: DownloadGrantRecord?)]) throws -> ([LicenseRecord], Decision)
    ) async throws -> Decision
    /// The device's licenses, newest first, each with its grant's state.
    func licenses(applicationId: String, deviceId: String, limit: Int) async throws -> [(license: LicenseRecord, grantState: DownloadGrantState?)]
}

/// What the license door decides on.
public struct LicenseDoorState: Sendable {
    /// What a download permission is decided on: the device, the counts, the held grant.
    public var permission: DownloadPermissionState
    /// The grant the request named, in whatever state, if it is the device's.
    public var named: DownloadGrantRecord?
    /// The newest unreleased license of the grant the device holds of the asset, if any.
    public var heldLicense: LicenseRecord?
    public var contentKeys: [ContentKeyRecord]
    /// The device's agreement key (X9.63 P-256), if it registered one.
    public var agreementKey: Data?
}

/// What the door writes: a new grant (nil: it used the held one) and a new license.
public struct LicenseIssue: Sendable {
    public var grant: DownloadGrantRecord?
    public var license: LicenseRecord
}

/// A license as recorded: to whom, for what, and what became of it.
public struct LicenseRecord: Sendable, Equatable, Codable {
    public var licenseId: String
    public var applicationId: String
    public var deviceId: String
    public var userId: String
    public var assetId: String
    public var grantId: String
    public var system: LicenseSystem
    /// Lowercase hex key ids, in the order asked.
    public var kids: [String]
    public var issuedAt: Date
    public var renewedAt: Date?
    public var expiresAt: Date?
    public var releasedAt: Date?
}
