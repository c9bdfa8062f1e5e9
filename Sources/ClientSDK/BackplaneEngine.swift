import Crypto
import Foundation
import BackplaneWire

/// The SDK's engine: one per app (or per simulated device). Start it with the user, and it
/// registers the device once, keeps it registered, and syncs at start, every `sync.interval`,
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
    /// Feeds, their rules and the queue of subscription items.
    public nonisolated var subscriptions: SubscriptionManager { SubscriptionManager(engine: self) }
    /// The event log: `log(_:)` queues durably; the engine uploads.
    public nonisolated let eventLogger: EventLogger

    /// Lifecycle: a stopped engine (shut down) stays stopped; an unregistered one can `start()` again.
    public enum State: String, Sendable {
        case idle, running, unregistered, shutDown
    }

    public internal(set) var state: State = .idle
    let broadcaster = EventBroadcaster()
    let clock = ServerClock()
    var local: LocalStore?
    var content: ContentStore?
    var deviceId: String?
    /// Proves to the backplane that a registration of `deviceId` comes from this install.
    var deviceKey: P256.Signing.PrivateKey?
    var registration: StoredRegistration?
    var lastSync: StoredSync?
    var lastError: BackplaneClientError?
    var consecutiveFailures = 0

    var inFlightSync: Task<SyncResult, any Error>?
    var loop: Task<Void, Never>?
    var channel: Task<Void, Never>?
    var channelConnected = false
    /// Wakes the sync loop early: `syncNow()` and the channel's wake-ups.
    let syncWake = WakeSignal()

    var uploader: Task<Void, Never>?
    var inFlightUpload: Task<Int, any Error>?
    /// Wakes the uploader early: an event queued, an upload asked for.
    let uploadWake = WakeSignal()
    var uploadRequested = false
    var uploadFailures = 0
    var uploadRetryAt: Date?
    /// The queue's size when the uploader last read it, and events logged since: the uploader is
    /// woken for the first event (to time its age) and at the threshold, not for every event.
    var queuedAtCheck = 0
    var queuedSinceCheck = 0

    public init(configuration: BackplaneClientConfiguration) {
        self.configuration = configuration
        self.eventLogger = EventLogger(configuration: configuration, storage: LocalStoreHandle(directory: configuration.dataDirectory))
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
        _ = try? eventLogger.log(.appLaunch)
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
        if state == .running {
            startLoop()
            startChannel()
            startUploader()
        }
    }

    /// Stops syncing and ends every event stream. The engine cannot be started again.
    public func shutdown() async {
        guard state != .shutDown else { return }
        if state == .running, registration != nil { await uploadEventsBeforeShutdown(within: .seconds(2)) }
        state = .shutDown
        stopUploader()
        loop?.cancel()
        loop = nil
        channel?.cancel()
        channel = nil
        if let inFlight = inFlightSync { _ = try? await inFlight.value }
        broadcaster.finish()
    }

    /// Reads what the SDK has stored without touching the network (for status displays).
    public func loadLocalState() throws {
        guard local == nil else { return }
        do {
            let store = try eventLogger.openStore()
            let identity = configuration.identityStore ?? FileDeviceIdentityStore(directory: configuration.dataDirectory)
            // The key first: an id saved without its key could never register again.
            var key = try identity.loadDeviceKey().flatMap { try? P256.Signing.PrivateKey(rawRepresentation: $0) }
            if key == nil {
                key = P256.Signing.PrivateKey()
                try identity.saveDeviceKey(key!.rawRepresentation)
            }
            var id = try identity.loadDeviceId()
            if id == nil {
                id = UUID().uuidString.lowercased()
                try identity.saveDeviceId(id!)
            }
            deviceKey = key
            registration = try store.load(StoredRegistration.self, .registration)
            lastSync = try store.load(StoredSync.self, .lastSync)
            if let offset = lastSync?.clockOffset { clock.update(offset: offset) }
            deviceId = id
            local = store
            content = ContentStore(dataDirectory: configuration.dataDirectory, local: store)
        } catch let error as BackplaneClientError {
            throw error
        } catch {
            throw BackplaneClientError(
                kind: .localStorage, message: "Cannot use the data directory \(configuration.dataDirectory.path).", underlying: error)
        }
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

    var api: BackplaneAPI {
        BackplaneAPI(configuration: configuration, serverNow: { [clock] in clock.now() })
    }

    func requireRunning() throws {
        guard state == .running else {
            throw BackplaneClientError(kind: .notRunning, message: "The engine is \(state.rawValue); call start() first.")
        }
    }

    /// The stored credentials, registering first when there are none or the user changed.
    func ensureRegistered() async throws -> DeviceCredentials {
        if let registration, registration.userId == configuration.userId { return registration.credentials }
        return try await register()
    }

    func register() async throws -> DeviceCredentials {
        guard let deviceId, let deviceKey, let local else {
            throw BackplaneClientError(kind: .notRunning, message: "The engine is not started.")
        }
        let request = RegisterDeviceRequest(
            userId: configuration.userId, deviceId: deviceId, externalDeviceId: configuration.device.externalDeviceId,
            nickname: configuration.device.nickname, platform: configuration.device.platform, model: configuration.device.model,
            osVersion: configuration.device.osVersion, sdkVersion: BackplaneSDK.version, appVersion: configuration.device.appVersion,
            moveFromOtherUser: configuration.device.moveFromOtherUser ? true : nil,
            devicePublicKey: Base64URL.encode(deviceKey.publicKey.x963Representation))
        // The credential still held (a user change) proves a device registered before it had a key.
        let held = registration?.credentials.credential
        let response: RegisterDeviceResponse
        do {
            response = try await api.register(request, deviceKey: deviceKey, credential: held)
        } catch let error as BackplaneClientError where error.code == .staleTimestamp {
            // The device clock is off by more than the signing window: learn the offset, try once more.
            clock.learn(fromStaleTimestamp: error)
            response = try await api.register(request, deviceKey: deviceKey, credential: held)
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
    func withCredentialRecovery<Answer: Sendable>(
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

    func deviceRequest(_ call: (BackplaneAPI, DeviceCredentials) async throws -> DeviceResponse) async throws -> Device {
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

    func updateProfile(_ update: DeviceProfileUpdate) async throws -> Device {
        try await deviceRequest { api, credentials in try await api.updateProfile(update, as: credentials) }
    }

    /// Stores the device and settings the server answered and emits what changed.
    func record(device: Device, settings: ApplicationSettings, serverTime: Date, syncedAt: Date?) throws {
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
    func report(_ error: BackplaneClientError) {
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
            // A kill whose acknowledgement reached the server but whose answer was lost ends here.
            let pendingKill = (try? local?.unacknowledgedOutcomes(limit: WireLimits.maxAcksPerSync))??
                .first { $0.type == .kill && $0.ack.outcome == .succeeded }
            try? local?.markAcknowledged(pendingKill.map { [$0.ack.commandId] } ?? [])
            try? finish(pendingKill?.type ?? .unregister)
        default:
            consecutiveFailures += 1
        }
    }

    func becomeUnregistered() throws {
        registration = nil
        try? local?.save(StoredRegistration?.none, .registration)
        if state == .running { state = .unregistered }
        loop?.cancel()
        loop = nil
        channel?.cancel()
        channel = nil
        stopUploader()
        broadcaster.emit(.unregistered)
    }
}

/// SDK-wide facts.
public enum BackplaneSDK {
    public static let version = "0.1.0"
}
