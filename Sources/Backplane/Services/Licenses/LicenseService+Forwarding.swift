import Foundation
import BackplaneWire

// Widevine, PlayReady and FairPlay through the one door: once the door has decided (and
// recorded the license and its grant), the device's challenge goes to the application's license
// server with the grant's entitlement and the policy; the server's answer comes back unchanged.
// A release is recorded first, then forwarded with the CDM's release message.
extension LicenseService {
    /// The license server's answer to `challenge`, for the CDM. Its refusal (a 4xx) is
    /// `license_denied` with reason `licenseServerRefused`, and the license the door recorded for
    /// it (`recorded`) is released, since the device holds none; its grant stays, as after a
    /// permission (the download's to end). A server that failed leaves the license recorded, and
    /// asking again forwards again under it.
    func forward(
        _ challenge: Data, for license: LicenseRecord, grant: DownloadGrantRecord, policy: LicensePolicy, to server: LicenseServerRecord,
        recorded: Bool
    ) async throws -> Data {
        let entitlement = try await entitlements.tokens(for: [grant]).first ?? nil
        let message = ForwardedLicenseMessage(
            kind: .license, system: license.system, applicationId: license.applicationId, licenseId: license.licenseId,
            grantId: license.grantId, assetId: license.assetId, deviceId: license.deviceId, userId: license.userId,
            payload: challenge.base64EncodedString(), entitlement: entitlement, policy: policy, expiresAt: license.expiresAt)
        switch try await forwarder.forward(message, to: server) {
        case .answered(let bytes):
            return bytes
        case .refused(let status):
            if recorded {
                let now = now()
                _ = try await store.releaseLicense(
                    applicationId: license.applicationId, deviceId: license.deviceId, licenseId: license.licenseId
                ) { held, _ -> (LicenseRecord?, DownloadGrantRecord?, Void) in
                    guard var held, held.releasedAt == nil else { return (nil, nil, ()) }
                    held.releasedAt = now
                    return (held, nil, ())
                }
            }
            throw ServiceError(
                .licenseDenied, "The application's \(server.system) license server refused the license (HTTP \(status)).",
                details: ["reason": .string(LicenseDenial.licenseServerRefused.rawValue), "licenseServerStatus": .int(Int64(status))])
        }
    }

    /// Tells the license server of a forwarded system that `license` was released, with the
    /// CDM's release message when the device sent one; its answer, for the CDM. Nil for
    /// ClearKey, when no server is configured any more, or when the server refused (a 4xx: the
    /// release stands on the backplane, and asking again would not change the server's mind).
    /// A server that failed is `license_server_failed`: the device sends the release again.
    func forwardRelease(of license: LicenseRecord, message: Data?) async throws -> Data? {
        guard license.system != .clearKey,
            let server = try await licenseServers.server(applicationId: license.applicationId, system: license.system)
        else { return nil }
        let forwarded = ForwardedLicenseMessage(
            kind: .release, system: license.system, applicationId: license.applicationId, licenseId: license.licenseId,
            grantId: license.grantId, assetId: license.assetId, deviceId: license.deviceId, userId: license.userId,
            payload: message?.base64EncodedString())
        switch try await forwarder.forward(forwarded, to: server) {
        case .answered(let bytes): return bytes
        case .refused: return nil
        }
    }

    /// The CDM's release message of a release request, when it carries one (400 unless base64 of
    /// 1 to `WireLimits.maxLicenseChallengeBytes` bytes).
    static func releaseMessage(_ request: LicenseReleaseRequest) throws -> Data? {
        guard let text = request.message else { return nil }
        guard let bytes = Data(base64: text, bytes: WireLimits.maxLicenseChallengeBytes) else {
            throw ServiceError.validation("'message' must be base64 of 1 to \(WireLimits.maxLicenseChallengeBytes) bytes.", field: "message")
        }
        return bytes
    }
}
