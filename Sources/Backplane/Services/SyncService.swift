import Foundation
import BackplaneWire

/// `POST /v1/sync`: the command section first (acks may take the device out), then the device
/// section, so the answer shows the device as it is after the acks.
public struct SyncService: Sendable {
    let devices: DeviceService
    let commands: CommandService

    public func sync(applicationId: String, deviceId: String, _ request: SyncRequest) async throws -> SyncResponse {
        let (commands, results) = try await commands.sync(applicationId: applicationId, deviceId: deviceId, acks: request.acks ?? [])
        let device = try await devices.syncDevice(applicationId: applicationId, deviceId: deviceId, request)
        return SyncResponse(
            device: device.device, settings: device.settings, serverTime: device.serverTime, commands: commands, ackResults: results)
    }
}
