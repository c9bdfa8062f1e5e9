import Foundation
import BackplaneWire

// The device's own requests: download on/off, profile, the user's devices, unregister.
extension BackplaneEngine {
    // MARK: the device's own requests

    /// Asks the backplane to turn download on or off for this device. Turning it on while the
    /// user is at the device limit throws a `.server` error with code `device_limit_reached`.
    @discardableResult
    public func updateDownloadEnabled(_ enabled: Bool) async throws -> Device {
        try await deviceRequest { api, credentials in try await api.setDownloadEnabled(enabled, as: credentials) }
    }

    @discardableResult
    public func setNickname(_ nickname: String?) async throws -> Device {
        try await updateProfile(DeviceProfileUpdate(nickname: nickname ?? ""))
    }

    @discardableResult
    public func setExternalDeviceId(_ externalDeviceId: String?) async throws -> Device {
        try await updateProfile(DeviceProfileUpdate(externalDeviceId: externalDeviceId ?? ""))
    }

    /// Hands the backplane the platform's push token (nil clears it).
    @discardableResult
    public func setPushToken(_ pushToken: String?) async throws -> Device {
        try await updateProfile(DeviceProfileUpdate(pushToken: pushToken ?? ""))
    }

    /// The user's registered devices, with how many may download and the limit.
    public func userDevices() async throws -> UserDevicesResponse {
        try requireRunning()
        do {
            let credentials = try await ensureRegistered()
            return try await withCredentialRecovery(credentials) { api, credentials in try await api.userDevices(as: credentials) }
        } catch let error as BackplaneClientError {
            report(error)
            throw error
        }
    }

    /// Unregisters this device: it stops downloading, leaves the user's device list and stops syncing.
    public func unregister() async throws {
        try requireRunning()
        let credentials = try await ensureRegistered()
        do {
            _ = try await api.unregister(as: credentials)
        } catch let error as BackplaneClientError {
            report(error)
            throw error
        }
        try becomeUnregistered()
    }
}
