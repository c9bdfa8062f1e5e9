import Foundation
import BackplaneWire

/// Devices. Registration and every change that can enable download read the user's
/// download-enabled count and write in one transaction: the device limit holds under concurrency.
public protocol DeviceStore: Sendable {
    func device(applicationId: String, deviceId: String) async throws -> DeviceRecord?
    /// A device with its open commands (pending and delivered, in delivery order), read in one
    /// store call: what sign-in reads of every device's request, the device as the backplane
    /// holds it and what waits for it, so that a sync that changes nothing answers from that read
    /// (`SyncPlan.signedIn`). Nil when there is no such device. (One statement on SQLite; two on
    /// one PostgreSQL connection, which may see different commits, as two separate reads would.)
    func deviceWithOpenCommands(applicationId: String, deviceId: String) async throws -> (DeviceRecord, [CommandRecord])?
    /// The registered devices of a user, in registration order.
    func devices(applicationId: String, userId: String) async throws -> [DeviceRecord]
    /// A page of devices with `rowId` greater than `afterRowId`, in `rowId` order.
    func devices(applicationId: String, filter: DeviceFilter, afterRowId: Int64?, limit: Int) async throws -> [DeviceRecord]
    /// The application's registered devices, those enabled for download and those seen since
    /// `seenSince`, counted in one statement (a walk of the application's devices).
    func fleetSummary(applicationId: String, seenSince: Date) async throws -> FleetSummary

    /// Writes the `DeviceChange` decided by `decide` (the row inserted or replaced, the grants it
    /// releases), in one transaction with the read of `RegistrationState`.
    func registerDevice<Decision: Sendable>(
        applicationId: String, deviceId: String, userId: String,
        decide: @escaping @Sendable (RegistrationState) throws -> (DeviceChange, Decision)
    ) async throws -> (DeviceRecord, Decision)

    /// Writes the `DeviceChange` that `change` decides for an existing device, in one transaction
    /// with the read of the row and its user's `DeviceLimitState`. Nil when no such device exists.
    func updateDevice(
        applicationId: String, deviceId: String,
        _ change: @escaping @Sendable (DeviceRecord, DeviceLimitState) throws -> DeviceChange
    ) async throws -> DeviceRecord?

    /// Moves each device's `lastSeenAt` forward to the sighting's time (never back), in one
    /// transaction. Sightings of devices that do not exist change nothing.
    func recordLastSeen(_ sightings: [DeviceSighting]) async throws
}

@dynamicMemberLookup
public struct DeviceRecord: Sendable, Equatable, Codable {
    /// Store-assigned, increasing; the key of admin pagination. Nil before the first insert.
    public var rowId: Int64?
    public var applicationId: String
    /// The device as the wire shows it (`Device` in BackplaneWire, push token included): its
    /// fields are defined there once, and read and set here as the record's own
    /// (`record.userId`), through `@dynamicMemberLookup`.
    public var device: Device
    /// SHA-256 of the current device credential; empty once an admin released the device (no
    /// credential matches it, and the next registration of the id needs no proof).
    public var credentialHash: String
    /// The device key (base64url X9.63 P-256) recorded at registration; re-registering the device
    /// needs a proof by it. Nil for a device registered without one, or released.
    public var publicKey: String?

    public subscript<Value>(dynamicMember field: WritableKeyPath<Device, Value>) -> Value {
        get { device[keyPath: field] }
        set { device[keyPath: field] = newValue }
    }

    public var isRegistered: Bool { device.unregisteredAt == nil }

    public init(
        rowId: Int64? = nil, applicationId: String, deviceId: String, userId: String, externalDeviceId: String? = nil,
        nickname: String? = nil, platform: String, model: String? = nil, osVersion: String? = nil, sdkVersion: String? = nil,
        appVersion: String? = nil, pushToken: String? = nil, downloadEnabled: Bool, credentialHash: String, publicKey: String? = nil,
        registeredAt: Date, updatedAt: Date, lastSeenAt: Date, unregisteredAt: Date? = nil, pushProvider: PushProvider? = nil
    ) {
        self.rowId = rowId
        self.applicationId = applicationId
        self.device = Device(
            deviceId: deviceId, userId: userId, externalDeviceId: externalDeviceId, nickname: nickname, platform: platform, model: model,
            osVersion: osVersion, sdkVersion: sdkVersion, appVersion: appVersion, pushToken: pushToken, pushProvider: pushProvider,
            downloadEnabled: downloadEnabled,
            registeredAt: registeredAt, updatedAt: updatedAt, lastSeenAt: lastSeenAt, unregisteredAt: unregisteredAt)
        self.credentialHash = credentialHash
        self.publicKey = publicKey
    }

    // Coded flat, the device's fields beside the record's own, as before they were one type.
    private enum CodingKeys: String, CodingKey {
        case rowId, applicationId, credentialHash, publicKey
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        rowId = try container.decodeIfPresent(Int64.self, forKey: .rowId)
        applicationId = try container.decode(String.self, forKey: .applicationId)
        credentialHash = try container.decode(String.self, forKey: .credentialHash)
        publicKey = try container.decodeIfPresent(String.self, forKey: .publicKey)
        device = try Device(from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        try device.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(rowId, forKey: .rowId)
        try container.encode(applicationId, forKey: .applicationId)
        try container.encode(credentialHash, forKey: .credentialHash)
        try container.encodeIfPresent(publicKey, forKey: .publicKey)
    }
}

/// What a device change writes, as the service decided it: the row, and the download grants it
/// ends, as `SyncDecision` says for a sync. A store writes what it is told and infers nothing (a
/// device moved to another user or unregistered releases its grants because the service says so).
public struct DeviceChange: Sendable, Equatable {
    public var device: DeviceRecord
    /// The device's grants to end as `released`, at the device's `updatedAt` (the change's time).
    public var releases: GrantRelease?

    public init(_ device: DeviceRecord, releasing releases: GrantRelease? = nil) {
        self.device = device
        self.releases = releases
    }
}

/// What a device mutation sees, read inside the store's transaction so that a decision taken
/// on it (the device limit) cannot be invalidated by a concurrent request.
public struct DeviceLimitState: Sendable {
    public var settings: ApplicationSettings
    /// Registered, download-enabled devices of the user in question, not counting the device itself.
    public var otherEnabledDevices: Int
    /// Registered devices of the user, enabled or not, not counting the device itself.
    public var otherRegisteredDevices: Int
}

public struct RegistrationState: Sendable {
    /// The row with this application and device id, registered or not.
    public var existing: DeviceRecord?
    /// Counted for the user the device is registering to.
    public var limit: DeviceLimitState
}

/// A device's last signed request, for `DeviceStore.recordLastSeen`.
public struct DeviceSighting: Sendable, Equatable {
    public var applicationId: String
    public var deviceId: String
    public var at: Date

    public init(applicationId: String, deviceId: String, at: Date) {
        self.applicationId = applicationId
        self.deviceId = deviceId
        self.at = at
    }
}

public struct DeviceFilter: Sendable, Equatable {
    public var userId: String?
    public var externalDeviceId: String?
    /// Exact match: the console's find.
    public var nickname: String?
    public var includeUnregistered: Bool

    public init(userId: String? = nil, externalDeviceId: String? = nil, nickname: String? = nil, includeUnregistered: Bool = false) {
        self.userId = userId
        self.externalDeviceId = externalDeviceId
        self.nickname = nickname
        self.includeUnregistered = includeUnregistered
    }
}

/// The console overview's device figures, counted in one read.
public struct FleetSummary: Sendable, Equatable {
    public var registeredDevices: Int
    public var downloadEnabledDevices: Int
    /// Registered devices whose last accepted request is at or after the summary's `seenSince`.
    public var devicesSeenSince: Int

    public init(registeredDevices: Int, downloadEnabledDevices: Int, devicesSeenSince: Int) {
        self.registeredDevices = registeredDevices
        self.downloadEnabledDevices = downloadEnabledDevices
        self.devicesSeenSince = devicesSeenSince
    }
}
