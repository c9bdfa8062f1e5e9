import Crypto
import Foundation
import Synchronization
import BackplaneWire

/// Registration and credential recovery: holds the device's credentials, registers when there
/// are none or the user changed (one registration at a time, joined by every caller), and runs
/// device requests so that a refused credential (another install re-registered this device id)
/// registers again and a device clock off by more than the signing window is corrected, each
/// retried once.
actor DeviceSession {
    nonisolated let deviceId: String
    /// The backplane's device API, signing with the clock as corrected by the last syncs.
    nonisolated let api: BackplaneAPI
    /// Proves to the backplane that a registration of `deviceId` comes from this install.
    private let deviceKey: P256.Signing.PrivateKey
    private let configuration: BackplaneClientConfiguration
    private let database: SDKDatabase
    private let clock: ServerClock
    private let broadcaster: EventBroadcaster
    private let snapshot: DeviceSnapshot
    private var registration: StoredRegistration?
    private var registering: Task<DeviceCredentials, any Error>?
    /// Runs before the device is registered for another user, with the previous user and the
    /// credentials still held for it: the events that user logged go up before the device
    /// leaves it (afterwards the backplane takes events for the new user only).
    nonisolated let beforeUserChange = Mutex<(@Sendable (_ userId: String, _ credentials: DeviceCredentials) async -> Void)?>(nil)

    init(
        deviceId: String, deviceKey: P256.Signing.PrivateKey, configuration: BackplaneClientConfiguration, database: SDKDatabase,
        clock: ServerClock, broadcaster: EventBroadcaster, snapshot: DeviceSnapshot
    ) throws {
        self.deviceId = deviceId
        self.deviceKey = deviceKey
        self.configuration = configuration
        self.database = database
        self.clock = clock
        self.broadcaster = broadcaster
        self.snapshot = snapshot
        self.api = try BackplaneAPI(configuration: configuration, serverNow: { [clock] in clock.signingNow() })
        self.registration = try database.load(StoredRegistration.self, .registration)
    }

    var isRegistered: Bool { registration != nil }

    /// The credentials held now, for the current user; nil rather than registering.
    var heldCredentials: DeviceCredentials? {
        guard let registration, registration.userId == configuration.userId else { return nil }
        return registration.credentials
    }

    /// The stored credentials, registering first when there are none or the user changed.
    func credentials() async throws -> DeviceCredentials {
        if let heldCredentials { return heldCredentials }
        if let registering { return try await registering.value }
        let task = Task {
            // Cleared as soon as it ends, so that a caller refused afterwards registers anew
            // rather than joining a registration that is over.
            defer { registering = nil }
            return try await register()
        }
        registering = task
        return try await task.value
    }

    /// Runs a device request with the credentials, recovering once from a refused credential, a
    /// stale timestamp, or a 429 whose `Retry-After` is at most `longestRateLimitWait` seconds.
    func request<Answer: Sendable>(_ call: @Sendable (BackplaneAPI, DeviceCredentials) async throws -> Answer) async throws -> Answer {
        let credentials = try await credentials()
        do {
            return try await call(api, credentials)
        } catch let error as BackplaneClientError where error.code == .invalidCredentials {
            // Unless a caller already registered again while this request was out.
            if registration?.credentials == credentials { registration = nil }
            return try await call(api, try await self.credentials())
        } catch let error as BackplaneClientError where error.code == .staleTimestamp {
            clock.learn(fromStaleTimestamp: error)
            return try await call(api, credentials)
        } catch let error as BackplaneClientError where error.code == .rateLimited {
            // A short wait (the device's bucket refills within seconds, e.g. after the download
            // queue asked for many grants at once) is waited out once; a longer one is the caller's.
            guard let seconds = error.details?["retryAfterSeconds"]?.intValue, (1...Self.longestRateLimitWait).contains(seconds) else { throw error }
            try await Task.sleep(for: .seconds(seconds))
            return try await call(api, credentials)
        }
    }

    /// The longest `Retry-After` a request waits out before it is retried once.
    static let longestRateLimitWait: Int64 = 5

    /// The device is out (unregistered or killed): the credentials are dropped for good.
    func forget() {
        registration = nil
        try? database.save(StoredRegistration?.none, .registration)
    }

    private func register() async throws -> DeviceCredentials {
        if let held = registration, held.userId != configuration.userId, let hook = beforeUserChange.withLock({ $0 }) {
            await hook(held.userId, held.credentials)
        }
        let request = RegisterDeviceRequest(
            userId: configuration.userId, deviceId: deviceId, externalDeviceId: configuration.device.externalDeviceId,
            nickname: configuration.device.nickname, platform: configuration.device.platform, model: configuration.device.model,
            osVersion: configuration.device.osVersion, sdkVersion: BackplaneSDK.version, appVersion: configuration.device.appVersion,
            moveFromOtherUser: configuration.device.moveFromOtherUser ? true : nil,
            devicePublicKey: Base64URL.encode(deviceKey.publicKey.x963Representation))
        // The credential still held (a user change) proves a device registered before it had a key.
        let held = registration?.credentials.credential
        var userToken = try await userToken()
        let response: RegisterDeviceResponse
        do {
            response = try await api.register(request, deviceKey: deviceKey, credential: held, userToken: userToken)
        } catch let error as BackplaneClientError where error.code == .staleTimestamp {
            // The device clock is off by more than the signing window: learn the offset, try once more.
            clock.learn(fromStaleTimestamp: error)
            response = try await api.register(request, deviceKey: deviceKey, credential: held, userToken: userToken)
        } catch let error as BackplaneClientError
            where [.userTokenRequired, .userTokenInvalid].contains(error.code) && configuration.userToken != nil
        {
            // Expired on the way, or the backend's keys rotated: one fresh token, one more try.
            userToken = try await self.userToken()
            response = try await api.register(request, deviceKey: deviceKey, credential: held, userToken: userToken)
        }
        let stored = StoredRegistration(
            credentials: DeviceCredentials(deviceId: response.device.deviceId, credential: response.deviceCredential),
            userId: configuration.userId, registeredAt: Date())
        do {
            try database.save(stored, .registration)
        } catch {
            throw BackplaneClientError(kind: .localStorage, message: "Could not store the device credential.", underlying: error)
        }
        registration = stored
        // The backplane released the grants of an earlier registration; a held one is answered again.
        try? database.forgetQueuedGrants()
        broadcaster.emit(.registered(response.device, outcome: response.outcome))
        try snapshot.record(device: response.device, settings: response.settings, serverTime: response.serverTime, syncedAt: nil)
        if response.deviceLimitReached {
            broadcaster.emit(.deviceLimitReached(limit: response.settings.deviceLimit, enabledCount: nil))
        }
        return stored.credentials
    }

    /// A token from the app's backend for the configured user, or nil when the app gives none.
    private func userToken() async throws -> String? {
        guard let provide = configuration.userToken else { return nil }
        do {
            return try await provide(configuration.userId)
        } catch {
            throw BackplaneClientError(
                kind: .userToken, message: "The app could not give a user token for '\(configuration.userId)'.", underlying: error)
        }
    }
}
