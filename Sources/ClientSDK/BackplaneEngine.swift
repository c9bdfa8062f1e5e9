import Crypto
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
    /// Feeds, their rules and the queue of subscription items.
    public nonisolated var subscriptions: SubscriptionManager { SubscriptionManager(engine: self) }
    /// The event log: `log(_:)` queues durably; the engine uploads.
    public nonisolated let eventLogger: EventLogger

    /// Lifecycle: a stopped engine (shut down) stays stopped; an unregistered one can `start()` again.
    public enum State: String, Sendable {
        case idle, running, unregistered, shutDown
    }

    public private(set) var state: State = .idle
    let broadcaster = EventBroadcaster()
    private let clock = ServerClock()
    var local: LocalStore?
    var content: ContentStore?
    private var deviceId: String?
    /// Proves to the backplane that a registration of `deviceId` comes from this install.
    private var deviceKey: P256.Signing.PrivateKey?
    private var registration: StoredRegistration?
    private var lastSync: StoredSync?
    private var lastError: BackplaneClientError?
    private var consecutiveFailures = 0

    private var inFlightSync: Task<SyncResult, any Error>?
    private var loop: Task<Void, Never>?
    private var channel: Task<Void, Never>?
    private var channelConnected = false
    private var wakeWaiter: CheckedContinuation<Void, Never>?
    private var wakePending = false
    private var waitGeneration = 0

    private var uploader: Task<Void, Never>?
    private var inFlightUpload: Task<Int, any Error>?
    private var uploadWaiter: CheckedContinuation<Void, Never>?
    private var uploadRequested = false
    private var uploadFailures = 0
    private var uploadRetryAt: Date?
    /// The queue's size when the uploader last read it, and events logged since: the uploader is
    /// woken for the first event (to time its age) and at the threshold, not for every event.
    private var queuedAtCheck = 0
    private var queuedSinceCheck = 0

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
        resumeWaiter()
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

    // MARK: sync

    /// Syncs now and returns the result; joins the sync already under way instead of starting a
    /// second one.
    @discardableResult
    public func sync() async throws -> SyncResult {
        try requireRunning()
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
            // Commands executed in a round are acknowledged in the next; a few rounds settle it.
            var result = try await syncRound()
            var rounds = 1
            while state == .running, rounds < 3, try storage({ try $0.unacknowledgedOutcomes(limit: 1) }).isEmpty == false {
                // What the commands logged goes up before their acknowledgements: a kill's
                // acknowledgement takes the device out, and with it the right to upload.
                _ = try? await uploadEvents(reportingErrors: false)
                result = try await syncRound()
                rounds += 1
            }
            if state == .running { try await syncSubscriptionChanges() }
            consecutiveFailures = 0
            lastError = nil
            if state == .running {
                broadcaster.emit(.syncCompleted(result))
                requestEventUpload()
            }
            return result
        } catch let error as BackplaneClientError {
            report(error)
            throw error
        }
    }

    /// One `POST /v1/sync`: send unacknowledged outcomes, record the answer, finish what the
    /// acknowledgements finish (kill, unregister), execute new commands.
    private func syncRound() async throws -> SyncResult {
        let credentials = try await ensureRegistered()
        let pending = try storage { try $0.unacknowledgedOutcomes(limit: WireLimits.maxAcksPerSync) }
        let report = SyncRequest(
            appVersion: configuration.appVersion, osVersion: configuration.osVersion,
            acks: pending.isEmpty ? nil : pending.map(\.ack))
        let sentAt = Date()
        let response = try await withCredentialRecovery(credentials) { api, credentials in
            try await api.sync(report, as: credentials)
        }
        let receivedAt = Date()
        clock.observe(serverTime: response.serverTime, sentAt: sentAt, receivedAt: receivedAt)
        try record(device: response.device, settings: response.settings, serverTime: response.serverTime, syncedAt: receivedAt)

        // Every answered ack is settled: accepted and duplicate are recorded server-side, and a
        // rejected one never will be.
        let answered = Dictionary(response.ackResults.map { ($0.commandId, $0.status) }, uniquingKeysWith: { first, _ in first })
        try storage { try $0.markAcknowledged(Array(answered.keys)) }
        let finishing = pending.first { outcome in
            (outcome.type == .kill || outcome.type == .unregister) && outcome.ack.outcome == .succeeded
                && [.accepted, .duplicate].contains(answered[outcome.ack.commandId])
        }
        if let finishing {
            try finish(finishing.type)
        } else {
            try execute(response.commands)
        }
        return SyncResult(
            device: response.device, settings: response.settings, serverTime: response.serverTime,
            syncedAt: receivedAt, clockOffset: clock.offset)
    }

    // MARK: remote commands

    /// Runs each command not run before and stores its outcome for the next sync to acknowledge.
    /// The outcome is stored after the effect: a crash in between runs the command again on the
    /// next start, which is harmless because every effect is idempotent (deleting what is gone).
    private func execute(_ commands: [Command]) throws {
        guard let content else { return }
        for command in commands where state == .running {
            guard try storage({ try !$0.hasOutcome(commandId: command.commandId) }) else { continue }
            var outcome = CommandAck(commandId: command.commandId, outcome: .succeeded)
            do {
                switch command.type {
                case .wipe:
                    try wipe(content)
                case .deleteAssets:
                    let deleted = try content.delete(command.assetIds ?? [])
                    for assetId in deleted { _ = try? eventLogger.log(.assetDeleted(assetId: assetId, reason: .remote)) }
                    broadcaster.emit(.assetsDeleted(assetIds: deleted, reason: .remote))
                case .kill:
                    broadcaster.emit(.startingRemoteKill)
                    try wipe(content)
                case .unregister, .syncNow:
                    // Unregistering takes effect when the backplane has the acknowledgement; a
                    // syncNow is done by the sync that acknowledges it.
                    break
                }
            } catch {
                outcome = CommandAck(commandId: command.commandId, outcome: .failed, reason: "\(error)".prefix(utf8Bytes: WireLimits.maxReasonLength))
            }
            try storage { try $0.recordOutcome(LocalStore.Outcome(ack: outcome, type: command.type)) }
        }
    }

    /// Deletes every download and logs it: each asset deleted (reason deleteAll), then the reset.
    private func wipe(_ content: ContentStore) throws {
        let deleted = try content.delete(nil)
        for assetId in deleted { _ = try? eventLogger.log(.assetDeleted(assetId: assetId, reason: .deleteAll)) }
        _ = try? eventLogger.log(.reset(.remoteWipe))
        broadcaster.emit(.remoteWipe(deletedAssetIds: deleted))
    }

    /// The backplane has the acknowledgement of a kill or unregister: the device is out.
    private func finish(_ type: CommandType) throws {
        try becomeUnregistered()
        if type == .kill { broadcaster.emit(.remoteKill) }
    }

    func storage<Value>(_ body: (LocalStore) throws -> Value) throws -> Value {
        guard let local else { throw BackplaneClientError(kind: .notRunning, message: "The engine is not started.") }
        do {
            return try body(local)
        } catch {
            throw BackplaneClientError(kind: .localStorage, message: "Could not use the SDK database.", underlying: error)
        }
    }

    // MARK: downloaded content

    /// Puts a file in place as the downloaded content of `assetId` (copied into the SDK's content
    /// directory) and records it. The download engine will do this itself; until then apps and
    /// the harness use it.
    @discardableResult
    public func addDownloadedAsset(assetId: String, copying file: URL) throws -> LocalAsset {
        try loadLocalState()
        guard let content else { throw BackplaneClientError(kind: .notRunning, message: "The engine is not started.") }
        do {
            return try content.add(assetId: assetId, copying: file)
        } catch {
            throw BackplaneClientError(kind: .localStorage, message: "Could not add \(file.path) as asset \(assetId).", underlying: error)
        }
    }

    /// The downloaded assets the SDK holds.
    public func downloadedAssets() throws -> [LocalAsset] {
        try loadLocalState()
        return try storage { try $0.assets() }
    }

    /// Where an asset's file is.
    public func fileURL(of asset: LocalAsset) -> URL? {
        content?.url(of: asset)
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

    private func register() async throws -> DeviceCredentials {
        guard let deviceId, let deviceKey, let local else {
            throw BackplaneClientError(kind: .notRunning, message: "The engine is not started.")
        }
        let request = RegisterDeviceRequest(
            userId: configuration.userId, deviceId: deviceId, externalDeviceId: configuration.externalDeviceId,
            nickname: configuration.nickname, platform: configuration.platform, model: configuration.model,
            osVersion: configuration.osVersion, sdkVersion: BackplaneSDK.version, appVersion: configuration.appVersion,
            moveFromOtherUser: configuration.moveFromOtherUser ? true : nil,
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

    private func becomeUnregistered() throws {
        registration = nil
        try? local?.save(StoredRegistration?.none, .registration)
        if state == .running { state = .unregistered }
        loop?.cancel()
        loop = nil
        channel?.cancel()
        channel = nil
        stopUploader()
        resumeWaiter()
        broadcaster.emit(.unregistered)
    }

    // MARK: the wake-up channel

    private func startChannel() {
        guard configuration.useWakeUpChannel, channel == nil else { return }
        channel = Task { [weak self] in await self?.runChannel() }
    }

    /// Keeps the channel open while running: reconnects with backoff and syncs on every wake-up.
    /// The server's first wake-up comes once the channel is registered, so the sync it starts
    /// catches up on what happened while the channel was down and nothing falls in between.
    private func runChannel() async {
        var failures = 0
        while state == .running, !Task.isCancelled {
            if let credentials = registration?.credentials {
                let channel = DeviceChannel(api: api)
                try? await channel.run(
                    as: credentials,
                    onOpen: { [weak self] in await self?.channelOpened() },
                    onWakeUp: { [weak self] in await self?.syncNow() })
                failures = channelConnected ? 1 : failures + 1
                channelClosed()
            } else {
                failures += 1
            }
            guard state == .running, !Task.isCancelled else { return }
            try? await Task.sleep(for: configuration.retry.delay(afterFailures: failures))
        }
    }

    private func channelOpened() {
        channelConnected = true
        broadcaster.emit(.channelStateChanged(connected: true))
    }

    private func channelClosed() {
        guard channelConnected else { return }
        channelConnected = false
        broadcaster.emit(.channelStateChanged(connected: false))
    }

    /// Whether the wake-up channel is open now.
    public var isChannelConnected: Bool { channelConnected }

    // MARK: event upload

    /// Uploads the queued events now, batch after batch until the queue is empty, and returns
    /// how many the backplane confirmed. Joins an upload already under way.
    @discardableResult
    public func uploadEvents() async throws -> Int {
        try await uploadEvents(reportingErrors: true)
    }

    private func uploadEvents(reportingErrors: Bool) async throws -> Int {
        try requireRunning()
        if let inFlight = inFlightUpload { return try await inFlight.value }
        let task = Task { try await self.performUpload() }
        inFlightUpload = task
        defer { inFlightUpload = nil }
        do {
            return try await task.value
        } catch let error as BackplaneClientError {
            if reportingErrors { report(error) }
            throw error
        }
    }

    private func performUpload() async throws -> Int {
        var sent = 0
        var rejected: [EventResult] = []
        defer {
            if sent > 0 { broadcaster.emit(.logsSent(count: sent)) }
            if !rejected.isEmpty { broadcaster.emit(.logsRejected(rejected)) }
        }
        while state == .running {
            let batch = try storage { try $0.queuedEvents(limit: configuration.eventBatchSize) }
            guard !batch.isEmpty else { break }
            let credentials = try await ensureRegistered()
            let response = try await withCredentialRecovery(credentials) { api, credentials in
                try await api.uploadEvents(EventBatch(sentAt: Date(), events: batch), as: credentials)
            }
            // Every answered event leaves the queue: accepted and duplicate are stored, and a
            // rejected one never will be.
            let answered = response.results.filter { batch.indices.contains($0.index) }
            guard !answered.isEmpty else {
                // The backplane answers every event of a batch. An answer naming none would leave
                // the queue as it is, and the uploader asking again at once, forever.
                throw BackplaneClientError(
                    kind: .invalidResponse, message: "The backplane's answer to an upload of \(batch.count) events named none of them.")
            }
            try storage { try $0.deleteQueuedEvents(answered.map { batch[$0.index].sequence }) }
            sent += answered.count { $0.status != .rejected }
            rejected += answered.filter { $0.status == .rejected }
        }
        return sent
    }

    private func uploadEventsBeforeShutdown(within limit: Duration) async {
        let upload = Task { try await self.uploadEvents(reportingErrors: false) }
        let timer = Task {
            try await Task.sleep(for: limit)
            upload.cancel()
        }
        _ = try? await upload.value
        timer.cancel()
    }

    /// Asks the uploader to send what is queued, whatever the count and age.
    private func requestEventUpload() {
        uploadRequested = true
        resumeUploader()
    }

    private func eventQueued() {
        queuedSinceCheck += 1
        let queued = queuedAtCheck + queuedSinceCheck
        if queued == 1 || queued >= configuration.eventUploadThreshold { resumeUploader() }
    }

    private func startUploader() {
        guard uploader == nil else { return }
        eventLogger.onQueued { [weak self] in
            Task { await self?.eventQueued() }
        }
        uploadRequested = true
        uploader = Task { [weak self] in await self?.runUploader() }
    }

    private func stopUploader() {
        eventLogger.onQueued(nil)
        uploader?.cancel()
        uploader = nil
        resumeUploader()
    }

    /// Uploads when enough events are queued, when the oldest is old enough, or when asked
    /// (start, after a sync); backs off while uploads fail.
    private func runUploader() async {
        while state == .running, !Task.isCancelled {
            var wait: Duration?
            do {
                let (count, oldest) = try storage { try $0.eventQueueState() }
                (queuedAtCheck, queuedSinceCheck) = (count, 0)
                let age = oldest.map { Date().timeIntervalSince($0) } ?? 0
                let due = count > 0 && (uploadRequested || count >= configuration.eventUploadThreshold || age >= configuration.maxEventAge.seconds)
                if let retryAt = uploadRetryAt, retryAt > Date() {
                    wait = .milliseconds(Int64(retryAt.timeIntervalSinceNow * 1000) + 1)
                } else if due, registration != nil {
                    uploadRequested = false
                    do {
                        _ = try await uploadEvents(reportingErrors: true)
                        uploadFailures = 0
                        uploadRetryAt = nil
                    } catch {
                        uploadFailures += 1
                        uploadRequested = true
                        uploadRetryAt = Date().addingTimeInterval(configuration.retry.delay(afterFailures: uploadFailures).seconds)
                    }
                    continue
                } else if count > 0 {
                    wait = .milliseconds(Int64(max(configuration.maxEventAge.seconds - age, 0) * 1000) + 1)
                }
            } catch {
                uploadFailures += 1
                wait = configuration.retry.delay(afterFailures: uploadFailures)
            }
            await waitForUploadSignal(wait)
        }
    }

    /// Sleeps until an event is queued, an upload is requested, or `delay` passes (forever when nil).
    private func waitForUploadSignal(_ delay: Duration?) async {
        let timer = delay.map { delay in
            Task { [weak self] in
                try? await Task.sleep(for: delay)
                await self?.resumeUploader()
            }
        }
        await withCheckedContinuation { continuation in
            uploadWaiter = continuation
        }
        timer?.cancel()
    }

    private func resumeUploader() {
        uploadWaiter?.resume()
        uploadWaiter = nil
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

    /// Offsets further than this are not a device clock's error but a broken or hostile answer;
    /// taking one would move signing timestamps past what an integer holds.
    static let plausibleOffset: TimeInterval = 200 * 365 * 86_400

    func update(offset: TimeInterval) {
        guard offset.isFinite, abs(offset) <= Self.plausibleOffset else { return }
        state.withLock { $0 = offset }
    }

    func observe(serverTime: Date, sentAt: Date, receivedAt: Date) {
        guard WireLimits.acceptedDates.contains(serverTime) else { return }
        let midpoint = sentAt.addingTimeInterval(receivedAt.timeIntervalSince(sentAt) / 2)
        update(offset: serverTime.timeIntervalSince(midpoint))
    }

    /// A `stale_timestamp` answer carries the server's time in `details.serverTime` (Unix seconds).
    func learn(fromStaleTimestamp error: BackplaneClientError) {
        guard let serverSeconds = error.details?["serverTime"]?.intValue else { return }
        update(offset: Double(serverSeconds) - Date().timeIntervalSince1970)
    }
}
