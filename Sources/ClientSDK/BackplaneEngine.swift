import Foundation
import Shared

/// The SDK's engine: one per app (or per simulated device). Start it with the user, and it
/// registers the device once, keeps it registered, and syncs at start, every `syncInterval`,
/// and on `syncNow()`, backing off with jitter while the backplane cannot be reached.
///
/// ```swift
/// let engine = BackplaneEngine(configuration: .init(
///     backplaneURL: url, appKeyId: keyId, appKeySecret: secret, userId: "alice", dataDirectory: dir))
/// let events = engine.events()
/// try await engine.start()
/// for await event in events { ... }
/// ```
public actor BackplaneEngine {
    public nonisolated let configuration: BackplaneClientConfiguration

    /// Lifecycle: a stopped engine (shut down) stays stopped; an unregistered one can `start()` again.
    public enum State: String, Sendable {
        case idle, running, unregistered, shutDown
    }

    public private(set) var state: State = .idle
    private let broadcaster = EventBroadcaster()
    private let clock = ServerClock()
    private var local: LocalStore?
    private var deviceId: String?
    private var registration: StoredRegistration?
    private var lastSync: StoredSync?
    private var lastError: BackplaneClientError?
    private var consecutiveFailures = 0

    private var inFlightSync: Task<SyncResult, any Error>?
    private var loop: Task<Void, Never>?
    private var wakeWaiter: CheckedContinuation<Void, Never>?
    private var wakePending = false
    private var waitGeneration = 0

    public init(configuration: BackplaneClientConfiguration) {
        self.configuration = configuration
    }

    /// A new stream of SDK events; call it once per subscriber, before `start()` to see everything.
    public nonisolated func events() -> AsyncStream<SDKEvent> {
        broadcaster.subscribe()
    }

    // MARK: lifecycle

    /// Loads the device identity and state, registers the device if it is not (or the user
    /// changed), syncs once, and starts the background sync loop.
    ///
    /// A communications failure does not throw: the engine reports it as an event and keeps
    /// retrying, so an app starts offline. It throws for what retrying cannot fix: an invalid
    /// app key, a device registered to another user, or an unusable data directory.
    public func start() async throws {
        switch state {
        case .running: return
        case .shutDown: throw BackplaneClientError(kind: .notRunning, message: "The engine was shut down; create a new one.")
        case .idle, .unregistered: break
        }
        try loadLocalState()
        state = .running
        do {
            _ = try await sync()
        } catch let error as BackplaneClientError where error.isTransient {
            // Reported as an event by `sync()`; the loop retries with backoff.
        } catch {
            // Unregistered by the backplane: reported as an event; the next start registers again.
            if state == .unregistered { return }
            if state == .running { state = .idle }
            throw error
        }
        if state == .running { startLoop() }
    }

    /// Stops syncing and ends every event stream. The engine cannot be started again.
    public func shutdown() async {
        guard state != .shutDown else { return }
        state = .shutDown
        loop?.cancel()
        loop = nil
        resumeWaiter()
        if let inFlight = inFlightSync { _ = try? await inFlight.value }
        broadcaster.finish()
    }

    /// Reads what the SDK has stored without touching the network (for status displays).
    public func loadLocalState() throws {
        guard local == nil else { return }
        do {
            let store = try LocalStore(directory: configuration.dataDirectory)
            let identity = configuration.identityStore ?? FileDeviceIdentityStore(directory: configuration.dataDirectory)
            var id = try identity.loadDeviceId()
            if id == nil {
                id = UUID().uuidString.lowercased()
                try identity.saveDeviceId(id!)
            }
            registration = try store.load(StoredRegistration.self, .registration)
            lastSync = try store.load(StoredSync.self, .lastSync)
            if let offset = lastSync?.clockOffset { clock.update(offset: offset) }
            deviceId = id
            local = store
        } catch let error as BackplaneClientError {
            throw error
        } catch {
            throw BackplaneClientError(
                kind: .localStorage, message: "Cannot use the data directory \(configuration.dataDirectory.path).", underlying: error)
        }
    }

    // MARK: sync

    /// Syncs now and returns the result; joins the sync already under way instead of starting a
    /// second one.
    @discardableResult
    public func sync() async throws -> SyncResult {
        if let inFlight = inFlightSync { return try await inFlight.value }
        let task = Task { try await self.performSync() }
        inFlightSync = task
        defer { inFlightSync = nil }
        return try await task.value
    }

    /// Asks the background loop to sync as soon as it can (e.g. on a push "sync now").
    public func syncNow() {
        resumeWaiter(orRemember: true)
    }

    private func performSync() async throws -> SyncResult {
        try requireRunning()
        do {
            let credentials = try await ensureRegistered()
            let report = SyncRequest(appVersion: configuration.appVersion, osVersion: configuration.osVersion)
            let sentAt = Date()
            let response = try await withCredentialRecovery(credentials) { api, credentials in
                try await api.sync(report, as: credentials)
            }
            let receivedAt = Date()
            clock.observe(serverTime: response.serverTime, sentAt: sentAt, receivedAt: receivedAt)
            let result = SyncResult(
                device: response.device, settings: response.settings, serverTime: response.serverTime,
                syncedAt: receivedAt, clockOffset: clock.offset)
            try record(device: response.device, settings: response.settings, serverTime: response.serverTime, syncedAt: receivedAt)
            consecutiveFailures = 0
            lastError = nil
            broadcaster.emit(.syncCompleted(result))
            return result
        } catch let error as BackplaneClientError {
            report(error)
            throw error
        }
    }

    // MARK: the device's own requests

    /// Asks the backplane to turn download on or off for this device. Turning it on while the
    /// user is at the device limit throws a `.server` error with code `device_limit_reached`.
    @discardableResult
    public func updateDownloadEnabled(_ enabled: Bool) async throws -> Device {
        try await deviceRequest { api, credentials in try await api.setDownloadEnabled(enabled, as: credentials) }
    }

    @discardableResult
    public func setNickname(_ nickname: String?) async throws -> Device {
        try await updateProfile(DeviceProfileUpdate(nickname: nickname ?? ""))
    }

    @discardableResult
    public func setExternalDeviceId(_ externalDeviceId: String?) async throws -> Device {
        try await updateProfile(DeviceProfileUpdate(externalDeviceId: externalDeviceId ?? ""))
    }

    /// Hands the backplane the platform's push token (nil clears it).
    @discardableResult
    public func setPushToken(_ pushToken: String?) async throws -> Device {
        try await updateProfile(DeviceProfileUpdate(pushToken: pushToken ?? ""))
    }

    /// The user's registered devices, with how many may download and the limit.
    public func userDevices() async throws -> UserDevicesResponse {
        try requireRunning()
        do {
            let credentials = try await ensureRegistered()
            return try await withCredentialRecovery(credentials) { api, credentials in try await api.userDevices(as: credentials) }
        } catch let error as BackplaneClientError {
            report(error)
            throw error
        }
    }

    /// Unregisters this device: it stops downloading, leaves the user's device list and stops syncing.
    public func unregister() async throws {
        try requireRunning()
        let credentials = try await ensureRegistered()
        do {
            _ = try await api.unregister(as: credentials)
        } catch let error as BackplaneClientError {
            report(error)
            throw error
        }
        try becomeUnregistered()
    }

    // MARK: state

    public struct Status: Sendable {
        public var state: State
        public var deviceId: String?
        public var userId: String
        public var isRegistered: Bool
        public var device: Device?
        public var settings: ApplicationSettings?
        public var lastSyncAt: Date?
        public var clockOffset: TimeInterval
        public var lastError: BackplaneClientError?
    }

    public var status: Status {
        Status(
            state: state, deviceId: deviceId, userId: configuration.userId, isRegistered: registration != nil,
            device: lastSync?.device, settings: lastSync?.settings, lastSyncAt: lastSync?.syncedAt,
            clockOffset: clock.offset, lastError: lastError)
    }

    /// The current time by the backplane's clock, as estimated at the last syncs. Availability
    /// rules use it, so that changing the device clock does not extend a download's life.
    public nonisolated var serverNow: Date { clock.now() }

    // MARK: internals

    private var api: BackplaneAPI {
        BackplaneAPI(configuration: configuration, serverNow: { [clock] in clock.now() })
    }

    private func requireRunning() throws {
        guard state == .running else {
            throw BackplaneClientError(kind: .notRunning, message: "The engine is \(state.rawValue); call start() first.")
        }
    }

    /// The stored credentials, registering first when there are none or the user changed.
    private func ensureRegistered() async throws -> DeviceCredentials {
        if let registration, registration.userId == configuration.userId { return registration.credentials }
        return try await register()
    }

    private func register() async throws -> DeviceCredentials {
        guard let deviceId, let local else { throw BackplaneClientError(kind: .notRunning, message: "The engine is not started.") }
        let request = RegisterDeviceRequest(
            userId: configuration.userId, deviceId: deviceId, externalDeviceId: configuration.externalDeviceId,
            nickname: configuration.nickname, platform: configuration.platform, model: configuration.model,
            osVersion: configuration.osVersion, sdkVersion: BackplaneSDK.version, appVersion: configuration.appVersion,
            moveFromOtherUser: configuration.moveFromOtherUser ? true : nil)
        let response: RegisterDeviceResponse
        do {
            response = try await api.register(request)
        } catch let error as BackplaneClientError where error.code == .staleTimestamp {
            // The device clock is off by more than the signing window: learn the offset, try once more.
            clock.learn(fromStaleTimestamp: error)
            response = try await api.register(request)
        }
        let stored = StoredRegistration(
            credentials: DeviceCredentials(deviceId: response.device.deviceId, credential: response.deviceCredential),
            userId: configuration.userId, registeredAt: Date())
        do {
            try local.save(stored, .registration)
        } catch {
            throw BackplaneClientError(kind: .localStorage, message: "Could not store the device credential.", underlying: error)
        }
        registration = stored
        broadcaster.emit(.registered(response.device, outcome: response.outcome))
        try record(device: response.device, settings: response.settings, serverTime: response.serverTime, syncedAt: nil)
        if response.deviceLimitReached {
            broadcaster.emit(.deviceLimitReached(limit: response.settings.deviceLimit, enabledCount: nil))
        }
        return stored.credentials
    }

    /// Runs a device request; when the credential is refused (another install re-registered this
    /// device id) or the clock is off, registers again or corrects the clock and retries once.
    private func withCredentialRecovery<Answer: Sendable>(
        _ credentials: DeviceCredentials, _ call: (BackplaneAPI, DeviceCredentials) async throws -> Answer
    ) async throws -> Answer {
        do {
            return try await call(api, credentials)
        } catch let error as BackplaneClientError where error.code == .invalidCredentials {
            registration = nil
            return try await call(api, try await register())
        } catch let error as BackplaneClientError where error.code == .staleTimestamp {
            clock.learn(fromStaleTimestamp: error)
            return try await call(api, credentials)
        }
    }

    private func deviceRequest(_ call: (BackplaneAPI, DeviceCredentials) async throws -> DeviceResponse) async throws -> Device {
        try requireRunning()
        do {
            let credentials = try await ensureRegistered()
            let response = try await withCredentialRecovery(credentials, call)
            try record(device: response.device, settings: response.settings, serverTime: response.serverTime, syncedAt: nil)
            return response.device
        } catch let error as BackplaneClientError {
            report(error)
            throw error
        }
    }

    private func updateProfile(_ update: DeviceProfileUpdate) async throws -> Device {
        try await deviceRequest { api, credentials in try await api.updateProfile(update, as: credentials) }
    }

    /// Stores the device and settings the server answered and emits what changed.
    private func record(device: Device, settings: ApplicationSettings, serverTime: Date, syncedAt: Date?) throws {
        let previous = lastSync
        let next = StoredSync(
            device: device, settings: settings, serverTime: serverTime,
            syncedAt: syncedAt ?? previous?.syncedAt ?? Date(), clockOffset: clock.offset)
        do {
            try local?.save(next, .lastSync)
        } catch {
            throw BackplaneClientError(kind: .localStorage, message: "Could not store the sync state.", underlying: error)
        }
        lastSync = next
        if let previous {
            if previous.device.downloadEnabled != device.downloadEnabled {
                broadcaster.emit(.downloadEnabledChanged(device.downloadEnabled))
            }
            if previous.settings != settings {
                broadcaster.emit(.settingsChanged(settings))
            }
        }
    }

    /// Turns an error into the events the app listens for, and the engine's state.
    private func report(_ error: BackplaneClientError) {
        lastError = error
        switch (error.kind, error.code) {
        case _ where error.isTransient:
            consecutiveFailures += 1
            broadcaster.emit(.communicationsFailure(error))
        case (.server, .invalidCredentials), (.server, .invalidSignature):
            broadcaster.emit(.invalidCredentials(error))
        case (.server, .deviceAlreadyRegistered):
            broadcaster.emit(.deviceAlreadyRegistered(deviceId: deviceId ?? ""))
        case (.server, .deviceLimitReached):
            let limit = error.details?["deviceLimit"]?.intValue.map(Int.init) ?? lastSync?.settings.deviceLimit ?? 0
            broadcaster.emit(.deviceLimitReached(limit: limit, enabledCount: error.details?["downloadEnabledCount"]?.intValue.map(Int.init)))
        case (.server, .deviceUnregistered):
            try? becomeUnregistered()
        default:
            consecutiveFailures += 1
        }
    }

    private func becomeUnregistered() throws {
        registration = nil
        try? local?.save(StoredRegistration?.none, .registration)
        if state == .running { state = .unregistered }
        loop?.cancel()
        loop = nil
        resumeWaiter()
        broadcaster.emit(.unregistered)
    }

    // MARK: the background loop

    private func startLoop() {
        loop?.cancel()
        loop = Task { [weak self] in await self?.runLoop() }
    }

    private func runLoop() async {
        while state == .running, !Task.isCancelled {
            let delay = consecutiveFailures == 0
                ? configuration.syncInterval
                : configuration.retry.delay(afterFailures: consecutiveFailures)
            await sleepOrWake(delay)
            guard state == .running, !Task.isCancelled else { return }
            do {
                _ = try await sync()
            } catch let error as BackplaneClientError where error.isInvalidCredentials || error.code == .deviceAlreadyRegistered {
                // Retrying cannot fix these; the app was told through events.
                state = .idle
                return
            } catch {
                // Reported; the next pass backs off.
            }
        }
    }

    private func sleepOrWake(_ delay: Duration) async {
        if wakePending {
            wakePending = false
            return
        }
        waitGeneration += 1
        let generation = waitGeneration
        let timer = Task { [weak self] in
            try? await Task.sleep(for: delay)
            await self?.timerFired(generation)
        }
        await withCheckedContinuation { continuation in
            wakeWaiter = continuation
        }
        timer.cancel()
    }

    private func timerFired(_ generation: Int) {
        guard generation == waitGeneration else { return }
        resumeWaiter()
    }

    private func resumeWaiter(orRemember remember: Bool = false) {
        if let waiter = wakeWaiter {
            wakeWaiter = nil
            waiter.resume()
        } else if remember {
            wakePending = true
        }
    }
}

/// SDK-wide facts.
public enum BackplaneSDK {
    public static let version = "0.1.0"
}

/// The offset between the backplane's clock and the device's, from the server time in sync
/// answers (taken at the midpoint of the request, as NTP does).
final class ServerClock: Sendable {
    private let state = Mutex<TimeInterval>(0)

    var offset: TimeInterval { state.withLock { $0 } }

    func now() -> Date { Date().addingTimeInterval(offset) }

    func update(offset: TimeInterval) {
        state.withLock { $0 = offset }
    }

    func observe(serverTime: Date, sentAt: Date, receivedAt: Date) {
        let midpoint = sentAt.addingTimeInterval(receivedAt.timeIntervalSince(sentAt) / 2)
        update(offset: serverTime.timeIntervalSince(midpoint))
    }

    /// A `stale_timestamp` answer carries the server's time in `details.serverTime` (Unix seconds).
    func learn(fromStaleTimestamp error: BackplaneClientError) {
        guard let serverSeconds = error.details?["serverTime"]?.intValue else { return }
        update(offset: Double(serverSeconds) - Date().timeIntervalSince1970)
    }
}
