/// What the device's power offers downloads now.
public struct PowerStatus: Sendable, Equatable {
    /// The battery's charge, 0 to 1; nil where the system does not say (no battery, a simulator).
    /// A negative level is unknown too (iOS's `UIDevice.batteryLevel` is -1 when it does not
    /// know); values above 1 are 1.
    public var batteryLevel: Double? {
        didSet { batteryLevel = batteryLevel.flatMap(Self.reportedLevel) }
    }
    /// On a charger (charging, or full and plugged in).
    public var isCharging: Bool

    public init(batteryLevel: Double?, isCharging: Bool) {
        self.batteryLevel = batteryLevel.flatMap(Self.reportedLevel)
        self.isCharging = isCharging
    }

    /// A level as the system reports it: negative is unknown, the rest lies in 0...1.
    static func reportedLevel(_ level: Double) -> Double? {
        level < 0 ? nil : clampLevel(level)
    }

    /// A level from the system, where NaN says nothing and anything else lies in 0...1.
    static func clampLevel(_ level: Double) -> Double {
        level.isNaN ? 0 : min(max(level, 0), 1)
    }
}

/// The app's view of the device's power, e.g. from `UIDevice.batteryLevel` and `batteryState`
/// on iOS, or `BatteryManager` on Android. The engine reads `status` before each file and
/// follows `changes()`, as it does the `NetworkMonitor`: it stops when the conditions the app set
/// (`DownloadOptions.conditions`) no longer hold, and goes on when they do again.
public protocol PowerMonitor: Sendable {
    var status: PowerStatus { get }
    /// Every change of `status`, for as long as the engine runs.
    func changes() -> AsyncStream<PowerStatus>
}

/// On mains power with no battery to speak of: the default where the SDK cannot ask the system
/// (Linux, tests). Every power condition holds.
public struct MainsPower: PowerMonitor {
    public init() {}
    public var status: PowerStatus { PowerStatus(batteryLevel: nil, isCharging: true) }
    public func changes() -> AsyncStream<PowerStatus> { AsyncStream { $0.finish() } }
}

/// What the device must offer before downloads run, beside the network rule
/// (`DownloadOptions.downloadOverCellular`), as Media3's `Requirements` (charging, unmetered
/// network) and the vendor SDKs' battery cut-off. All off by default. They are checked before
/// every file and whenever the app's monitors report a change, so a download stops when they
/// stop holding (its partial files kept) and goes on when they hold again.
public struct DownloadConditions: Sendable, Equatable {
    /// Download only on a charger (`PowerStatus.isCharging`).
    public var requiresCharging: Bool
    /// Off a charger, download only while the battery holds at least this much, 0 to 1 (nil:
    /// whatever the level). On a charger the level does not matter. A device whose level is
    /// unknown is taken to have enough: the app says nothing, so the SDK does not guess.
    public var minimumBatteryLevel: Double? {
        didSet { minimumBatteryLevel = minimumBatteryLevel.map(PowerStatus.clampLevel) }
    }
    /// Download only on a network that is neither expensive nor metered (`NetworkStatus`).
    public var requiresUnmeteredNetwork: Bool

    public init(requiresCharging: Bool = false, minimumBatteryLevel: Double? = nil, requiresUnmeteredNetwork: Bool = false) {
        self.requiresCharging = requiresCharging
        self.minimumBatteryLevel = minimumBatteryLevel.map(PowerStatus.clampLevel)
        self.requiresUnmeteredNetwork = requiresUnmeteredNetwork
    }

    /// Which condition `power` and `network` break, if any (the network's availability and the
    /// cellular rule are `DownloadRequirements`').
    func block(power: PowerStatus, network: NetworkStatus) -> DownloadBlock? {
        if requiresUnmeteredNetwork, network.isMetered || network.isExpensive { return .meteredNetwork }
        if requiresCharging, !power.isCharging { return .charging }
        if let minimum = minimumBatteryLevel, !power.isCharging, let level = power.batteryLevel, level < minimum { return .battery }
        return nil
    }
}
