import BackplaneWire

extension DeviceService {
    /// A user's registered devices are bounded, whatever the download limit: without the bound
    /// one app key could add rows for a user without end.
    static func checkRoomForAnotherDevice(_ limit: DeviceLimitState, userId: String) throws {
        let most = WireLimits.maxRegisteredDevicesPerUser
        guard limit.otherRegisteredDevices >= most else { return }
        throw ServiceError(.conflict,
            "User '\(userId)' has \(limit.otherRegisteredDevices) registered devices, the most allowed (\(most)); unregister one first.",
            details: ["registeredDevices": .int(Int64(limit.otherRegisteredDevices)), "limit": .int(Int64(most))])
    }
}
