import Foundation

/// Per-application settings, pushed to every device in every device response and sync.
///
/// Every number uses `-1` for "unlimited" (or "never" for the durations). Durations are in seconds.
public struct ApplicationSettings: Codable, Sendable, Equatable {
    /// Maximum download-enabled devices per user. `0` means no device may download.
    public var deviceLimit: Int
    /// How long a downloaded asset stays playable after its download completed.
    public var expiryAfterDownloadSeconds: Int
    /// How long a downloaded asset stays playable after it was first played.
    public var expiryAfterPlaySeconds: Int
    /// A device that has not synced for this long may not play its downloads until it syncs.
    public var offlineViewingPeriodSeconds: Int
    /// Maximum assets downloaded on one device at the same time.
    public var maxDownloadsPerDevice: Int
    /// Maximum assets held at once across all devices of one user (account).
    public var maxDownloadsPerAccount: Int
    /// Maximum times one asset may be downloaded by one account over its lifetime.
    public var maxLifetimeDownloadsPerAsset: Int
    /// Maximum copies of one asset held at once across the devices of one account.
    public var maxCopiesPerAccount: Int

    public static let unlimited = -1

    /// The documented defaults of a new application.
    public static let defaults = ApplicationSettings(
        deviceLimit: 5,
        expiryAfterDownloadSeconds: unlimited,
        expiryAfterPlaySeconds: unlimited,
        offlineViewingPeriodSeconds: unlimited,
        maxDownloadsPerDevice: 100,
        maxDownloadsPerAccount: unlimited,
        maxLifetimeDownloadsPerAsset: unlimited,
        maxCopiesPerAccount: unlimited
    )

    public init(
        deviceLimit: Int,
        expiryAfterDownloadSeconds: Int,
        expiryAfterPlaySeconds: Int,
        offlineViewingPeriodSeconds: Int,
        maxDownloadsPerDevice: Int,
        maxDownloadsPerAccount: Int,
        maxLifetimeDownloadsPerAsset: Int,
        maxCopiesPerAccount: Int
    ) {
        self.deviceLimit = deviceLimit
        self.expiryAfterDownloadSeconds = expiryAfterDownloadSeconds
        self.expiryAfterPlaySeconds = expiryAfterPlaySeconds
        self.offlineViewingPeriodSeconds = offlineViewingPeriodSeconds
        self.maxDownloadsPerDevice = maxDownloadsPerDevice
        self.maxDownloadsPerAccount = maxDownloadsPerAccount
        self.maxLifetimeDownloadsPerAsset = maxLifetimeDownloadsPerAsset
        self.maxCopiesPerAccount = maxCopiesPerAccount
    }

    /// Settings stored before a field existed decode with that field's default.
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = Self.defaults
        deviceLimit = try c.decodeIfPresent(Int.self, forKey: .deviceLimit) ?? d.deviceLimit
        expiryAfterDownloadSeconds = try c.decodeIfPresent(Int.self, forKey: .expiryAfterDownloadSeconds) ?? d.expiryAfterDownloadSeconds
        expiryAfterPlaySeconds = try c.decodeIfPresent(Int.self, forKey: .expiryAfterPlaySeconds) ?? d.expiryAfterPlaySeconds
        offlineViewingPeriodSeconds = try c.decodeIfPresent(Int.self, forKey: .offlineViewingPeriodSeconds) ?? d.offlineViewingPeriodSeconds
        maxDownloadsPerDevice = try c.decodeIfPresent(Int.self, forKey: .maxDownloadsPerDevice) ?? d.maxDownloadsPerDevice
        maxDownloadsPerAccount = try c.decodeIfPresent(Int.self, forKey: .maxDownloadsPerAccount) ?? d.maxDownloadsPerAccount
        maxLifetimeDownloadsPerAsset = try c.decodeIfPresent(Int.self, forKey: .maxLifetimeDownloadsPerAsset) ?? d.maxLifetimeDownloadsPerAsset
        maxCopiesPerAccount = try c.decodeIfPresent(Int.self, forKey: .maxCopiesPerAccount) ?? d.maxCopiesPerAccount
    }
}

/// A partial update of the settings: absent fields keep their value.
public struct ApplicationSettingsUpdate: Codable, Sendable, Equatable {
    public var deviceLimit: Int?
    public var expiryAfterDownloadSeconds: Int?
    public var expiryAfterPlaySeconds: Int?
    public var offlineViewingPeriodSeconds: Int?
    public var maxDownloadsPerDevice: Int?
    public var maxDownloadsPerAccount: Int?
    public var maxLifetimeDownloadsPerAsset: Int?
    public var maxCopiesPerAccount: Int?

    public init(
        deviceLimit: Int? = nil,
        expiryAfterDownloadSeconds: Int? = nil,
        expiryAfterPlaySeconds: Int? = nil,
        offlineViewingPeriodSeconds: Int? = nil,
        maxDownloadsPerDevice: Int? = nil,
        maxDownloadsPerAccount: Int? = nil,
        maxLifetimeDownloadsPerAsset: Int? = nil,
        maxCopiesPerAccount: Int? = nil
    ) {
        self.deviceLimit = deviceLimit
        self.expiryAfterDownloadSeconds = expiryAfterDownloadSeconds
        self.expiryAfterPlaySeconds = expiryAfterPlaySeconds
        self.offlineViewingPeriodSeconds = offlineViewingPeriodSeconds
        self.maxDownloadsPerDevice = maxDownloadsPerDevice
        self.maxDownloadsPerAccount = maxDownloadsPerAccount
        self.maxLifetimeDownloadsPerAsset = maxLifetimeDownloadsPerAsset
        self.maxCopiesPerAccount = maxCopiesPerAccount
    }

    /// The settings with this update's fields applied.
    public func applied(to settings: ApplicationSettings) -> ApplicationSettings {
        var result = settings
        if let deviceLimit { result.deviceLimit = deviceLimit }
        if let expiryAfterDownloadSeconds { result.expiryAfterDownloadSeconds = expiryAfterDownloadSeconds }
        if let expiryAfterPlaySeconds { result.expiryAfterPlaySeconds = expiryAfterPlaySeconds }
        if let offlineViewingPeriodSeconds { result.offlineViewingPeriodSeconds = offlineViewingPeriodSeconds }
        if let maxDownloadsPerDevice { result.maxDownloadsPerDevice = maxDownloadsPerDevice }
        if let maxDownloadsPerAccount { result.maxDownloadsPerAccount = maxDownloadsPerAccount }
        if let maxLifetimeDownloadsPerAsset { result.maxLifetimeDownloadsPerAsset = maxLifetimeDownloadsPerAsset }
        if let maxCopiesPerAccount { result.maxCopiesPerAccount = maxCopiesPerAccount }
        return result
    }
}
