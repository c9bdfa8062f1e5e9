import Foundation

/// How the SDK judges whether a downloaded asset may be played: the clocks it trusts and how
/// often it deletes what expired. Values out of range are clamped, in `init` and on assignment.
public struct RightsOptions: Sendable {
    /// The device's clocks; swap it in tests to move time.
    public var deviceClock: any DeviceClock
    /// How far the device's wall clock may drift from the monotonic clock (or, after a restart,
    /// fall behind the latest trusted time) before the SDK takes it for a clock that was set and
    /// stops trusting time until the next sync: 1 s to 1 day.
    public var clockTolerance: TimeInterval {
        didSet { clockTolerance = Self.clampTolerance(clockTolerance) }
    }
    /// The longest the expiry sweep waits between runs (it also runs at start, after each sync
    /// and at the next instant an asset expires): 10 ms to a day.
    public var sweepInterval: Duration {
        didSet { sweepInterval = Self.clampInterval(sweepInterval) }
    }
    /// Acquires, renews and releases the app's DRM licenses. The default,
    /// `BackplaneLicenseProvider`, does it through the backplane for ClearKey content and leaves
    /// content of other DRM systems alone; `NoLicenseProvider` does nothing.
    public var licenseProvider: any LicenseProvider
    /// How long before a license ends the sweep asks the provider to renew it (0 to 30 days).
    public var licenseRenewalLead: TimeInterval {
        didSet { licenseRenewalLead = Self.clampLead(licenseRenewalLead) }
    }

    public init(
        deviceClock: any DeviceClock = SystemDeviceClock(), clockTolerance: TimeInterval = 300, sweepInterval: Duration = .seconds(300),
        licenseProvider: any LicenseProvider = BackplaneLicenseProvider(), licenseRenewalLead: TimeInterval = 86_400
    ) {
        self.licenseRenewalLead = Self.clampLead(licenseRenewalLead)
        self.deviceClock = deviceClock
        self.clockTolerance = Self.clampTolerance(clockTolerance)
        self.sweepInterval = Self.clampInterval(sweepInterval)
        self.licenseProvider = licenseProvider
    }

    private static func clampLead(_ value: TimeInterval) -> TimeInterval {
        value.isFinite ? min(max(value, 0), 30 * 86_400) : 86_400
    }

    private static func clampInterval(_ value: Duration) -> Duration {
        min(max(value, .milliseconds(10)), .seconds(86_400))
    }

    private static func clampTolerance(_ value: TimeInterval) -> TimeInterval {
        value.isFinite ? min(max(value, 1), 86_400) : 300
    }
}
