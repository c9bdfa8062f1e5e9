import Foundation

/// One SDK install as the backplane knows it.
public struct Device: Codable, Sendable, Equatable {
    /// SDK-generated, persisted on the device; unique within an application.
    public var deviceId: String
    /// The app-supplied user (a person or a household) the device belongs to.
    public var userId: String
    /// An id the app keeps for its own purposes (support look-ups, remote wipe by external id).
    public var externalDeviceId: String?
    public var nickname: String?
    public var platform: String
    public var model: String?
    public var osVersion: String?
    public var sdkVersion: String?
    public var appVersion: String?
    /// Present only when the device itself or an admin asks.
    public var pushToken: String?
    /// Which service delivers to `pushToken`. Nil for a device that never named one: the
    /// backplane then goes by its platform (`PushProvider.assumed(forPlatform:)`).
    public var pushProvider: PushProvider?
    /// Whether the backplane lets this device download (the per-user device limit).
    public var downloadEnabled: Bool
    public var registeredAt: Date
    public var updatedAt: Date
    /// Last time the device made an authenticated request.
    public var lastSeenAt: Date
    /// Set once the device was unregistered; such a device is hidden from device lists.
    public var unregisteredAt: Date?

    public init(
        deviceId: String, userId: String, externalDeviceId: String? = nil, nickname: String? = nil,
        platform: String, model: String? = nil, osVersion: String? = nil, sdkVersion: String? = nil,
        appVersion: String? = nil, pushToken: String? = nil, pushProvider: PushProvider? = nil, downloadEnabled: Bool,
        registeredAt: Date, updatedAt: Date, lastSeenAt: Date, unregisteredAt: Date? = nil
    ) {
        self.deviceId = deviceId
        self.userId = userId
        self.externalDeviceId = externalDeviceId
        self.nickname = nickname
        self.platform = platform
        self.model = model
        self.osVersion = osVersion
        self.sdkVersion = sdkVersion
        self.appVersion = appVersion
        self.pushToken = pushToken
        self.pushProvider = pushProvider
        self.downloadEnabled = downloadEnabled
        self.registeredAt = registeredAt
        self.updatedAt = updatedAt
        self.lastSeenAt = lastSeenAt
        self.unregisteredAt = unregisteredAt
    }
}

/// `POST /v1/devices/register`, signed with the app key.
public struct RegisterDeviceRequest: Codable, Sendable, Equatable {
    public var userId: String
    public var deviceId: String
    public var externalDeviceId: String?
    public var nickname: String?
    public var platform: String
    public var model: String?
    public var osVersion: String?
    public var sdkVersion: String?
    public var appVersion: String?
    public var pushToken: String?
    /// Which service delivers to `pushToken` (APNs on Apple platforms, FCM on Android).
    public var pushProvider: PushProvider?
    /// When the device id is registered to another user, move it to `userId` instead of
    /// answering 409 `device_already_registered`. The old user's slot is freed.
    public var moveFromOtherUser: Bool?
    /// The device key's public half (base64url of the uncompressed X9.63 P-256 point); the request
    /// must then carry `X-Backplane-Device-Proof` made with it (see `RequestSigning`). Recorded at
    /// the device's first registration; re-registering the device later needs a proof by it.
    public var devicePublicKey: String?

    public init(
        userId: String, deviceId: String, externalDeviceId: String? = nil, nickname: String? = nil,
        platform: String, model: String? = nil, osVersion: String? = nil, sdkVersion: String? = nil,
        appVersion: String? = nil, pushToken: String? = nil, pushProvider: PushProvider? = nil, moveFromOtherUser: Bool? = nil,
        devicePublicKey: String? = nil
    ) {
        self.userId = userId
        self.deviceId = deviceId
        self.externalDeviceId = externalDeviceId
        self.nickname = nickname
        self.platform = platform
        self.model = model
        self.osVersion = osVersion
        self.sdkVersion = sdkVersion
        self.appVersion = appVersion
        self.pushToken = pushToken
        self.pushProvider = pushProvider
        self.moveFromOtherUser = moveFromOtherUser
        self.devicePublicKey = devicePublicKey
    }
}

/// What a registration did.
public struct RegistrationOutcome: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// A new device row was created.
    public static let created = RegistrationOutcome(rawValue: "created")
    /// The device was already registered to this user; the same device is returned.
    public static let existing = RegistrationOutcome(rawValue: "existing")
    /// The device was registered to another user and was moved (`moveFromOtherUser`).
    public static let moved = RegistrationOutcome(rawValue: "moved")
    /// The device had been unregistered and is registered again.
    public static let reactivated = RegistrationOutcome(rawValue: "reactivated")
    public static let allCases: [RegistrationOutcome] = [.created, .existing, .moved, .reactivated]
}

public struct RegisterDeviceResponse: Codable, Sendable, Equatable {
    public var device: Device
    public var outcome: RegistrationOutcome
    /// True when the same device id was already registered to the same user.
    public var alreadyRegistered: Bool
    /// True when the device was registered with download disabled because the user
    /// already has `settings.deviceLimit` download-enabled devices.
    public var deviceLimitReached: Bool
    /// The device credential. Send it as `X-Backplane-Device-Credential` on every later
    /// device request. Each registration issues a new one and the previous one stops working.
    public var deviceCredential: String
    public var settings: ApplicationSettings
    public var serverTime: Date

    public init(
        device: Device, outcome: RegistrationOutcome, alreadyRegistered: Bool, deviceLimitReached: Bool,
        deviceCredential: String, settings: ApplicationSettings, serverTime: Date
    ) {
        self.device = device
        self.outcome = outcome
        self.alreadyRegistered = alreadyRegistered
        self.deviceLimitReached = deviceLimitReached
        self.deviceCredential = deviceCredential
        self.settings = settings
        self.serverTime = serverTime
    }
}

/// Answer of every request about one device.
public struct DeviceResponse: Codable, Sendable, Equatable {
    public var device: Device
    public var settings: ApplicationSettings
    public var serverTime: Date

    public init(device: Device, settings: ApplicationSettings, serverTime: Date) {
        self.device = device
        self.settings = settings
        self.serverTime = serverTime
    }
}

/// `GET /v1/devices`: the registered devices of the calling device's user.
public struct UserDevicesResponse: Codable, Sendable, Equatable {
    public var devices: [Device]
    /// How many of `devices` are download-enabled, next to the limit in `settings`.
    public var downloadEnabledCount: Int
    public var settings: ApplicationSettings
    public var serverTime: Date

    public init(devices: [Device], downloadEnabledCount: Int, settings: ApplicationSettings, serverTime: Date) {
        self.devices = devices
        self.downloadEnabledCount = downloadEnabledCount
        self.settings = settings
        self.serverTime = serverTime
    }
}

/// `PATCH /v1/devices/{deviceId}`: absent fields keep their value; an empty string clears one.
public struct DeviceProfileUpdate: Codable, Sendable, Equatable {
    public var nickname: String?
    public var externalDeviceId: String?
    public var pushToken: String?
    /// Which service delivers to the push token; absent keeps the stored one.
    public var pushProvider: PushProvider?

    public init(nickname: String? = nil, externalDeviceId: String? = nil, pushToken: String? = nil, pushProvider: PushProvider? = nil) {
        self.nickname = nickname
        self.externalDeviceId = externalDeviceId
        self.pushToken = pushToken
        self.pushProvider = pushProvider
    }
}

/// `PUT .../download-enabled`.
public struct DownloadEnabledRequest: Codable, Sendable, Equatable {
    public var downloadEnabled: Bool

    public init(downloadEnabled: Bool) {
        self.downloadEnabled = downloadEnabled
    }
}

/// `GET /v1/admin/devices`: one page of devices.
public struct DevicePage: Codable, Sendable, Equatable {
    public var devices: [Device]
    /// Pass as `cursor` to get the next page; absent on the last page.
    public var nextCursor: String?

    public init(devices: [Device], nextCursor: String?) {
        self.devices = devices
        self.nextCursor = nextCursor
    }
}
