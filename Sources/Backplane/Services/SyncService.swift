import Foundation
import BackplaneWire

/// `POST /v1/sync`: the download reports first (so that a wipe acknowledged in the same sync
/// finds them recorded), then the command section (acks may take the device out), then the
/// device section, so the answer shows the device as it is after the acks.
public struct SyncService: Sendable {
    let devices: DeviceService
    let commands: CommandService
    let grants: DownloadGrantService

    /// `authenticated`: the device's row as this request's credential check read it. A sync with
    /// no acks and no download reports changes nothing of the device before its device section,
    /// so that section answers from this row instead of reading it again (one store round trip
    /// less on the commonest request; the profile of a quiet sync is mostly such hand-offs).
    public func sync(
        applicationId: String, deviceId: String, _ request: SyncRequest, authenticated: DeviceRecord? = nil
    ) async throws -> SyncResponse {
        let reports = try await grants.report(applicationId: applicationId, deviceId: deviceId, request.downloadReports ?? [])
        let (commands, results) = try await commands.sync(applicationId: applicationId, deviceId: deviceId, acks: request.acks ?? [])
        let unchanged = (request.acks ?? []).isEmpty && (request.downloadReports ?? []).isEmpty ? authenticated : nil
        let device = try await devices.syncDevice(applicationId: applicationId, deviceId: deviceId, request, alreadyRead: unchanged)
        return SyncResponse(
            device: device.device, settings: device.settings, serverTime: device.serverTime, commands: commands, ackResults: results,
            downloadReportResults: reports)
    }
}
