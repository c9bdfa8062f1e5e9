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

extension DeviceService {
    /// Binding a device to a user anew (created, moved, reactivated) needs the user's token
    /// where the application requires one.
    static func checkUserToken(_ verdict: UserIdentityService.Verdict, userId: String) throws {
        guard verdict == .missing else { return }
        throw ServiceError(.userTokenRequired,
            "This application requires a user token to register a device for a user: send one for '\(userId)' in \(UserToken.header).")
    }
}
