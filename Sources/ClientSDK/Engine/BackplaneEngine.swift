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
///
/// The engine is the front: it owns the lifecycle and the public API, turns failures into
/// events, and leaves each job to one collaborator (`Components`).
public actor BackplaneEngine {
    public nonisolated let configuration: BackplaneClientConfiguration
    /// Feeds, their rules and the queue of subscription items.
    public nonisolated var subscriptions: SubscriptionManager { SubscriptionManager(engine: self) }
    /// The event log: `log(_:)` queues durably; the engine uploads.
    public nonisolated let eventLogger: EventLogger
    /// The SDK database, which the engine opens at start and shares with the event logger.
    nonisolated let storage: SDKStorage
    /// The download queue and its rules.
    public nonisolated var downloads: DownloadManager { DownloadManager(engine: self) }
    /// Whether downloaded assets may be played, on a trusted clock.
    public nonisolated var rights: RightsManager { RightsManager(engine: self) }
    /// Loopback URLs that players play downloads through, rights kept at the door.
    public nonisolated var playback: PlaybackManager { PlaybackManager(engine: self) }
    /// Licenses of other DRM systems through the backplane's door (`exchange`), for the app's
    /// key-session code; ClearKey's are the SDK's own.
    public nonisolated var licenses: LicenseManager { LicenseManager(engine: self) }

    /// Lifecycle: a stopped engine (shut down) stays stopped; an unregistered one can `start()` again.
    public enum State: String, Sendable {
        case idle, running, unregistered, shutDown
    }

    public var state: State { lifecycle.current }

    let broadcaster = EventBroadcaster()
    let clock = ServerClock()
    let lifecycle = EngineLifecycle()
    var lastError: BackplaneClientError?
    /// Started by the first `playback.url(for:)`; stopped at shutdown.
    /// The playback server's start, once asked for (`BackplaneEngine+Playback.swift`).
    var playbackStart: Task<PlaybackServer, any Error>?
    /// Loaded from the data directory on first use.
    var components: Components?

    /// The engine's collaborators, one job each.
    struct Components {
        let database: SDKDatabase
        let content: ContentStore
        /// What the backplane last said about the device and the application.
        let snapshot: DeviceSnapshot
        /// Registration and credential recovery.
        let session: DeviceSession
        let subscriptions: SubscriptionSync
        let uploader: EventUploader
        /// Syncs, runs the commands they bring, keeps the background loop.
        let syncLoop: SyncLoop
        let channel: WakeUpChannel
        let downloads: DownloadRunner
        let rights: RightsKeeper
        /// Licenses through the backplane: ClearKey's built in, the other systems' exchanged.
        let licenses: BackplaneLicenses
        /// Seals the HLS keys downloads keep, and opens them for the playback server.
        let keyVault: KeyVault
    }

    public init(configuration: BackplaneClientConfiguration) {
        self.configuration = configuration
        self.storage = SDKStorage(directory: configuration.dataDirectory)
        self.eventLogger = EventLogger(configuration: configuration, storage: storage)
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
        let parts = try loadComponents()
        lifecycle.set(.running)
        _ = try? eventLogger.log(.appLaunch)
        do {
            _ = try await parts.syncLoop.sync()
        } catch let error as BackplaneClientError where error.isTransient {
            // Reported as an event by the sync; the loop retries with backoff.
        } catch {
            // Unregistered by the backplane: reported as an event; the next start registers again.
            if state == .unregistered { return }
            if state == .running { stop(becoming: .idle) }
            throw error
        }
        guard state == .running else { return }
        parts.syncLoop.start()
        if configuration.sync.useWakeUpChannel { parts.channel.start() }
        parts.uploader.start()
        parts.downloads.start()
        parts.rights.start()
    }

    /// Stops syncing and ends every event stream. The engine cannot be started again.
    public func shutdown() async {
        guard state != .shutDown else { return }
        if state == .running, let components, await components.session.isRegistered {
            await components.uploader.uploadBeforeShutdown(within: .seconds(2))
        }
        stop(becoming: .shutDown)
        await components?.syncLoop.finishInFlight()
        await components?.downloads.finishInFlight()
        await components?.rights.finishInFlight()
        if let playbackStart { await (try? playbackStart.value)?.stop() }
        broadcaster.finish()
    }

    func contentDirectory(for assetId: String) throws -> URL {
        try loadComponents().content.directory(for: assetId)
    }

    /// Reads what the SDK has stored without touching the network (for status displays).
    public func loadLocalState() throws {
        try loadComponents()
    }

    /// Leaves `.running` (or stays where it is): every background job stops, in this order,
    /// before anything else runs on the engine.
    func stop(becoming next: State) {
        lifecycle.set(next)
        components?.syncLoop.stop()
        components?.channel.stop()
        components?.uploader.stop()
        components?.downloads.stop()
        components?.rights.stop()
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
        get async {
            let lastSync = components?.snapshot.current
            return Status(
                state: state, deviceId: components?.session.deviceId, userId: configuration.userId,
                isRegistered: await components?.session.isRegistered ?? false,
                device: lastSync?.device, settings: lastSync?.settings, lastSyncAt: lastSync?.syncedAt,
                clockOffset: clock.offset, lastError: lastError)
        }
    }

    /// The current time by the backplane's clock, as estimated at the last syncs. Availability
    /// rules use it, so that changing the device clock does not extend a download's life.
    public nonisolated var serverNow: Date { clock.now() }

    // MARK: internals

    /// The collaborators, created from the data directory on first use.
    @discardableResult
    func loadComponents() throws -> Components {
        if let components { return components }
        do {
            let database = try storage.open()
            let (deviceId, deviceKey) = try loadIdentity()
            let downloadSignal = WakeSignal()
            let events = EngineEvents(logger: eventLogger, broadcaster: broadcaster)
            let snapshot = try DeviceSnapshot(database: database, clock: clock, broadcaster: broadcaster, onChange: downloadSignal)
            let session = try DeviceSession(
                deviceId: deviceId, deviceKey: deviceKey, configuration: configuration, database: database, clock: clock,
                broadcaster: broadcaster, snapshot: snapshot)
            // The built-in provider needs the device's session, which only the engine has.
            // The license door's client: the provider too when the app kept the built-in one; for
            // an app's own provider, `engine.licenses` (its key sessions' challenges) all the same.
            let backplaneLicenses = BackplaneLicenses(
                session: session, database: database,
                agreementKey: try BackplaneLicenses.agreementKey(in: configuration.dataDirectory),
                requestSync: { [weak self] in Task { await self?.syncNow() } })
            let keyVault = try KeyVault.inDirectory(configuration.dataDirectory)
            var rightsOptions = configuration.rights
            if rightsOptions.licenseProvider is BackplaneLicenseProvider { rightsOptions.licenseProvider = backplaneLicenses }
            let content = ContentStore(
                dataDirectory: configuration.dataDirectory, database: database, licenses: rightsOptions.licenseProvider,
                events: events, downloadSignal: downloadSignal, sendLicenseReleases: { await backplaneLicenses.sendReleases() })
            // Best effort: what it cannot move now it moves at the next start.
            try? DirectoryNameMigration.run(content: content)
            let trustedClock = TrustedClock(
                deviceClock: configuration.rights.deviceClock, tolerance: configuration.rights.clockTolerance,
                stored: try database.load(TrustedClock.Stored.self, .trustedClock), save: { try database.save($0, .trustedClock) })
            let askBackplane: @Sendable (DownloadPermissionRequest) async throws -> DownloadPermissionResponse = { request in
                try await session.request { api, credentials in try await api.requestDownloadPermission(request, as: credentials) }
            }
            let rights = RightsKeeper(
                database: database, content: content, clock: trustedClock, snapshot: snapshot, options: rightsOptions,
                events: events, lifecycle: lifecycle,
                askBackplane: askBackplane, requestSync: { [weak self] in Task { await self?.syncNow() } })
            let downloads = DownloadRunner(
                database: database, content: content, options: configuration.downloads, snapshot: snapshot, lifecycle: lifecycle,
                events: events, signal: downloadSignal, clock: trustedClock,
                licenses: rightsOptions.licenseProvider, keyVault: keyVault,
                httpClient: try DownloadClients.client(trusting: configuration.downloads.originCertificateAuthorities),
                requestSync: { [weak self] in Task { await self?.syncNow() } },
                askBackplane: askBackplane)
            let subscriptions = SubscriptionSync(
                configuration: configuration, session: session, database: database, content: content, downloads: downloads,
                events: events, lifecycle: lifecycle)
            let uploader = EventUploader(
                configuration: configuration, session: session, database: database, eventLogger: eventLogger,
                broadcaster: broadcaster, lifecycle: lifecycle, engine: self)
            session.beforeUserChange.withLock { hook in
                hook = { [weak uploader] userId, credentials in await uploader?.uploadQueued(ofUser: userId, as: credentials) }
            }
            let commands = CommandExecutor(
                database: database, content: content, downloads: downloads, events: events, lifecycle: lifecycle)
            let syncLoop = SyncLoop(
                configuration: configuration, session: session, database: database, snapshot: snapshot, clock: clock,
                broadcaster: broadcaster, lifecycle: lifecycle, commands: commands, uploader: uploader,
                subscriptions: subscriptions, trustedClock: trustedClock, engine: self)
            let channel = WakeUpChannel(
                session: session, retry: configuration.sync.retry, broadcaster: broadcaster, lifecycle: lifecycle,
                onWakeUp: { [weak syncLoop] in syncLoop?.wakeUp() })
            let loaded = Components(
                database: database, content: content, snapshot: snapshot, session: session, subscriptions: subscriptions,
                uploader: uploader, syncLoop: syncLoop, channel: channel, downloads: downloads, rights: rights, licenses: backplaneLicenses,
                keyVault: keyVault)
            components = loaded
            return loaded
        } catch let error as BackplaneClientError {
            throw error
        } catch {
            throw BackplaneClientError(
                kind: .localStorage, message: "Cannot use the data directory \(configuration.dataDirectory.path).", underlying: error)
        }
    }

    /// The device id and key, created and saved on first use. The key first: an id saved without
    /// its key could never register again.
    private func loadIdentity() throws -> (String, P256.Signing.PrivateKey) {
        let identity = configuration.identityStore ?? FileDeviceIdentityStore(directory: configuration.dataDirectory)
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
        return (id!, key!)
    }

    /// The download engine, usable whenever the engine is not shut down (the queue can be
    /// changed offline; downloads run while the engine runs).
    func downloadRunner() throws -> DownloadRunner {
        guard state != .shutDown else {
            throw BackplaneClientError(kind: .notRunning, message: "The engine was shut down; create a new one.")
        }
        return try loadComponents().downloads
    }

    /// The rights keeper, usable whenever the engine is not shut down (rights are judged offline).
    func rightsKeeper() throws -> RightsKeeper {
        guard state != .shutDown else {
            throw BackplaneClientError(kind: .notRunning, message: "The engine was shut down; create a new one.")
        }
        return try loadComponents().rights
    }

    /// The collaborators of a running engine.
    func running() throws -> Components {
        try lifecycle.requireRunning()
        return try loadComponents()
    }

    /// Runs `body`, turning a failure into the app's events before passing it on.
    func reporting<Value>(_ body: () async throws -> Value) async throws -> Value {
        do {
            return try await body()
        } catch let error as BackplaneClientError {
            await report(error)
            throw error
        }
    }

    func becomeUnregistered() async {
        stop(becoming: state == .running ? .unregistered : state)
        await components?.session.forget()
        broadcaster.emit(.unregistered)
    }
}

extension BackplaneEngine: EngineControl {
    /// Turns an error into the events the app listens for, and the engine's state.
    func report(_ error: BackplaneClientError) async {
        lastError = error
        switch (error.kind, error.code) {
        case _ where error.isTransient:
            broadcaster.emit(.communicationsFailure(error))
        case (.server, .invalidCredentials), (.server, .invalidSignature):
            broadcaster.emit(.invalidCredentials(error))
        case (.server, .deviceAlreadyRegistered):
            broadcaster.emit(.deviceAlreadyRegistered(deviceId: components?.session.deviceId ?? ""))
        case (.server, .deviceLimitReached):
            let limit = error.details?["deviceLimit"]?.intValue.map(Int.init) ?? components?.snapshot.current?.settings.deviceLimit ?? 0
            broadcaster.emit(.deviceLimitReached(limit: limit, enabledCount: error.details?["downloadEnabledCount"]?.intValue.map(Int.init)))
        case (.server, .deviceUnregistered):
            // A kill whose acknowledgement reached the server but whose answer was lost ends here.
            let database = components?.database
            let pendingKill = (try? database?.unacknowledgedOutcomes(limit: WireLimits.maxAcksPerSync))??
                .first { $0.type == .kill && $0.ack.outcome == .succeeded }
            try? database?.markAcknowledged(pendingKill.map { [$0.ack.commandId] } ?? [])
            await deviceLeft(after: pendingKill?.type ?? .unregister)
        default:
            break
        }
    }

    func syncSucceeded() {
        lastError = nil
        // Time is trusted again and the settings may have changed: expired assets go now.
        components?.rights.sweepSoon()
        // Places freed by the reports this sync carried may let denied assets through.
        if let downloads = components?.downloads { Task { await downloads.retryDenied() } }
        // Releases of deleted assets' licenses that could not be sent when they were queued.
        if let licenses = components?.licenses { Task { await licenses.sendReleases() } }
    }

    func deviceLeft(after command: CommandType) async {
        await becomeUnregistered()
        if command == .kill { broadcaster.emit(.remoteKill) }
    }

    func stopAfterPermanentFailure() {
        if state == .running { stop(becoming: .idle) }
    }
}

/// SDK-wide facts.
public enum BackplaneSDK {
    public static let version = "0.2.0"
}
