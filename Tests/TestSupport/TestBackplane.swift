import Backplane
import Foundation

/// What every test backplane starts with, for the server's suites and the SDK's alike.
extension BackplaneServices {
    /// A new application (its first app key), with the device limit set when given.
    public func testApplication(name: String, deviceLimit: Int? = nil) async throws -> (ApplicationRecord, CreatedAppKey) {
        let (application, key) = try await applications.createApplication(name: name)
        if let deviceLimit {
            _ = try await applications.updateSettings(applicationId: application.id, ApplicationSettingsUpdate { $0.deviceLimit = deviceLimit })
        }
        return (application, key)
    }
}

extension RateLimits {
    /// The server's limits but for registrations: suites register hundreds of devices, and start
    /// thousands of engines, against one server (`RegistrationAbuseTests` tests those limits on
    /// a router of its own).
    public static var tests: RateLimits {
        var limits = RateLimits()
        (limits.registrationAddressRate, limits.registrationUserRate) = (0, 0)
        return limits
    }
}
