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

    /// Every setting, by its name on the wire: the one list that decoding, partial updates
    /// (`ApplicationSettingsUpdate`) and forms walk, so a new setting is a property and a line here.
    public static let fields: [(name: String, keyPath: WritableKeyPath<ApplicationSettings, Int> & Sendable)] = [
        ("deviceLimit", \.deviceLimit),
        ("expiryAfterDownloadSeconds", \.expiryAfterDownloadSeconds),
        ("expiryAfterPlaySeconds", \.expiryAfterPlaySeconds),
        ("offlineViewingPeriodSeconds", \.offlineViewingPeriodSeconds),
        ("maxDownloadsPerDevice", \.maxDownloadsPerDevice),
        ("maxDownloadsPerAccount", \.maxDownloadsPerAccount),
        ("maxLifetimeDownloadsPerAsset", \.maxLifetimeDownloadsPerAsset),
        ("maxCopiesPerAccount", \.maxCopiesPerAccount),
    ]

    /// The wire name of the setting at `keyPath`.
    public static func name(of keyPath: WritableKeyPath<ApplicationSettings, Int>) -> String {
        fields.first { $0.keyPath == keyPath }?.name ?? "\(keyPath)"
    }

    /// Settings stored before a field existed decode with that field's default.
    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: FieldKey.self)
        self = Self.defaults
        for field in Self.fields {
            if let value = try container.decodeIfPresent(Int.self, forKey: FieldKey(field.name)) { self[keyPath: field.keyPath] = value }
        }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: FieldKey.self)
        for field in Self.fields { try container.encode(self[keyPath: field.keyPath], forKey: FieldKey(field.name)) }
    }
}

/// A partial update of the settings: the settings it names change, the others keep their
/// value. Its fields are `ApplicationSettings`'s, read and set as its own (`update.deviceLimit`,
/// nil when absent) through `@dynamicMemberLookup`:
///
/// ```swift
/// let update = ApplicationSettingsUpdate { $0.deviceLimit = 3 }
/// ```
@dynamicMemberLookup
public struct ApplicationSettingsUpdate: Codable, Sendable, Equatable {
    /// The values set, by setting name.
    private var values: [String: Int] = [:]

    public init() {}

    public init(_ set: (inout ApplicationSettingsUpdate) -> Void) {
        set(&self)
    }

    public subscript(dynamicMember keyPath: WritableKeyPath<ApplicationSettings, Int>) -> Int? {
        get { values[ApplicationSettings.name(of: keyPath)] }
        set { values[ApplicationSettings.name(of: keyPath)] = newValue }
    }

    /// The settings with this update's fields applied.
    public func applied(to settings: ApplicationSettings) -> ApplicationSettings {
        var result = settings
        for field in ApplicationSettings.fields {
            if let value = values[field.name] { result[keyPath: field.keyPath] = value }
        }
        return result
    }

    /// Decodes the settings it names; other keys are ignored here (the admin API refuses them
    /// before decoding, naming the field).
    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: FieldKey.self)
        for field in ApplicationSettings.fields {
            if let value = try container.decodeIfPresent(Int.self, forKey: FieldKey(field.name)) { values[field.name] = value }
        }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: FieldKey.self)
        for field in ApplicationSettings.fields {
            if let value = values[field.name] { try container.encode(value, forKey: FieldKey(field.name)) }
        }
    }
}

/// A coding key by name, for types whose keys come from a list (`ApplicationSettings.fields`).
struct FieldKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
