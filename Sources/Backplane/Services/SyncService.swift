import Foundation
import BackplaneWire

/// `POST /v1/sync`: the download reports first (so that a wipe acknowledged in the same sync
/// finds them recorded), then the command section (acks may take the device out), then the
/// device section, so the answer shows the device as it is after the acks.
///
/// The request's nonce is recorded by the sync itself (its route's middleware leaves it), before
/// anything else is written: with the download reports' write it goes alone, first; otherwise in
/// the command section's write when that makes one (one commit for an acknowledging sync instead
/// of two); otherwise alone before the device section.
public struct SyncService: Sendable {
    let store: any BackplaneStore
    let devices: DeviceService
    let commands: CommandService
    let grants: DownloadGrantService

    public func sync(applicationId: String, deviceId: String, _ request: SyncRequest) async throws -> SyncResponse {
        try await sync(applicationId: applicationId, deviceId: deviceId, request, authenticated: nil, signedRequest: nil)
    }

    /// `authenticated`: the device and its open commands as this request's credential check read
    /// them. A sync without acks changes no command before its command section, and one without
    /// acks or download reports changes nothing of the device before its device section, so
    /// those sections answer from that read instead of reading again: store round trips are
    /// most of a quiet sync's cost (a profile shows it bound by hand-offs between threads).
    func sync(
        applicationId: String, deviceId: String, _ request: SyncRequest, authenticated: DeviceRead?, signedRequest: SignedRequestRecord?
    ) async throws -> SyncResponse {
        let acks = request.acks ?? [], downloadReports = request.downloadReports ?? []
        var unrecorded = signedRequest
        if !downloadReports.isEmpty, let nonce = unrecorded {
            try await store.spend(nonce)
            unrecorded = nil
        }
        let reports = try await grants.report(applicationId: applicationId, deviceId: deviceId, downloadReports)
        let (commands, results, recordedNonce) = try await commands.sync(
            applicationId: applicationId, deviceId: deviceId, acks: acks, openAlreadyRead: acks.isEmpty ? authenticated?.openCommands : nil,
            signedRequest: unrecorded)
        if !recordedNonce, let nonce = unrecorded { try await store.spend(nonce) }
        // Accepted now: noted as seen before the device section, so the answer shows it (the
        // middleware notes it again after the handler, as for every route that records its own nonce).
        if signedRequest != nil { devices.lastSeen.saw(applicationId: applicationId, deviceId: deviceId, at: devices.now()) }
        let unchanged = acks.isEmpty && downloadReports.isEmpty ? authenticated?.record : nil
        let device = try await devices.syncDevice(applicationId: applicationId, deviceId: deviceId, request, alreadyRead: unchanged)
        return SyncResponse(
            device: device.device, settings: device.settings, serverTime: device.serverTime, commands: commands, ackResults: results,
            downloadReportResults: reports)
    }
}
