import Foundation
import BackplaneWire

/// Licenses of FairPlay, Widevine and PlayReady through the backplane: `engine.licenses`. The
/// platform's key session (AVContentKeySession, MediaDrm) makes the challenge; the app hands it
/// to `exchange`, and the backplane decides under the download rules (the grant, the limits, the
/// window) before it forwards the challenge to the application's license server with the
/// grant's entitlement. The answer goes back to the key session as it came. The SDK keeps the
/// license's id and end: every sync renews it or ends it (the asset's rights then say
/// `licenseExpired`), and deleting the asset releases it. docs/sdk.md shows the glue.
///
/// ```swift
/// let answer = try await engine.licenses.exchange(assetId: "film", system: .fairPlay, challenge: spc)
/// request.processContentKeyResponse(AVContentKeyResponse(fairPlayStreamingKeyResponseData: answer.license))
/// ```
public struct LicenseManager: Sendable {
    let engine: BackplaneEngine

    /// The license server's answer to the CDM's `challenge` for `assetId`. Throws the backplane's
    /// refusal as `BackplaneClientError` (`license_denied` with `details.reason`,
    /// `download_limit_reached`; `license_server_failed` when the server did not answer).
    public func exchange(assetId: String, system: LicenseSystem, challenge: Data) async throws -> LicenseExchange {
        let answer = try await engine.loadComponents().licenses.exchange(assetId: assetId, system: system, challenge: challenge)
        return LicenseExchange(
            licenseId: answer.licenseId, license: answer.license.flatMap { Data(base64Encoded: $0) } ?? Data(), expiresAt: answer.expiresAt,
            policy: answer.policy)
    }

    /// Releases the license now with the CDM's release message (MediaDrm's `KEY_TYPE_RELEASE`
    /// request, PlayReady's secure stop), and returns the license server's answer for the CDM
    /// (nil when it sent none). Deleting the asset releases its license anyway, without a
    /// message; this is for the proof of deletion a license server asks for.
    public func release(licenseId: String, message: Data?) async throws -> Data? {
        try await engine.loadComponents().licenses.release(licenseId: licenseId, message: message)
    }
}

/// What `exchange` got: the bytes for the key session, and the license as the backplane records it.
public struct LicenseExchange: Sendable, Equatable {
    public var licenseId: String
    /// The license server's answer, unchanged.
    public var license: Data
    /// When the backplane's record of the license ends unless a sync renews it.
    public var expiresAt: Date?
    /// The policy the license server was given, in Widevine's names.
    public var policy: LicensePolicy
}
