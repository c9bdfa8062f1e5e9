import Foundation
import Synchronization
import BackplaneWire

/// Syncing: `POST /v1/sync` rounds (one sync at a time; a second caller joins the one under way)
/// that acknowledge command outcomes, record the device's state and run new commands, then the
/// subscription changes; and the background loop that syncs every `sync.interval` and on
/// wake-ups, backing off with jitter while syncs fail.
actor SyncLoop {
    private let configuration: BackplaneClientConfiguration
    private let session: DeviceSession
    private let database: SDKDatabase
    private let snapshot: DeviceSnapshot
    private let clock: ServerClock
    private let broadcaster: EventBroadcaster
    private let lifecycle: EngineLifecycle
    private let commands: CommandExecutor
    private let uploader: EventUploader
    private let subscriptions: SubscriptionSync
    /// Rights' time: set from each sync's server time.
    private let trustedClock: TrustedClock
    private weak let engine: (any EngineControl)?

    private var inFlight: Task<SyncResult, any Error>?
    /// Syncs failed in a row: the loop's backoff.
    private var failures = 0
    /// Wakes the loop early: `syncNow()` and the channel's wake-ups.
    private let wake = WakeSignal()
    private let loop = Mutex<Task<Void, Never>?>(nil)

    init(
        configuration: BackplaneClientConfiguration, session: DeviceSession, database: SDKDatabase, snapshot: DeviceSnapshot,
        clock: ServerClock, broadcaster: EventBroadcaster, lifecycle: EngineLifecycle, commands: CommandExecutor,
        uploader: EventUploader, subscriptions: SubscriptionSync, trustedClock: TrustedClock, engine: any EngineControl
    ) {
        self.trustedClock = trustedClock
        self.configuration = configuration
        self.session = session
        self.database = database
        self.snapshot = snapshot
        self.clock = clock
        self.broadcaster = broadcaster
        self.lifecycle = lifecycle
        self.commands = commands
        self.uploader = uploader
        self.subscriptions = subscriptions
        self.engine = engine
    }

    /// Syncs now and returns the result; joins the sync already under way instead of starting a
    /// second one.
    func sync() async throws -> SyncResult {
        try lifecycle.requireRunning()
        if let inFlight { return try await inFlight.value }
        let task = Task { try await self.perform() }
        inFlight = task
        defer { inFlight = nil }
        return try await task.value
    }

    /// Waits for the sync under way, if any, to end.
    func finishInFlight() async {
        _ = try? await inFlight?.value
    }

    /// Asks the background loop to sync as soon as it can.
    nonisolated func wakeUp() {
        wake.signal()
    }

    nonisolated func start() {
        loop.withLock { task in
            task?.cancel()
            task = Task { [weak self] in await self?.run() }
        }
    }

    nonisolated func stop() {
        loop.withLock { task in
            task?.cancel()
            task = nil
        }
    }

    private func perform() async throws -> SyncResult {
        try lifecycle.requireRunning()
        do {
            // Commands executed in a round are acknowledged in the next; a few rounds settle it.
            var result = try await round()
            var rounds = 1
            while lifecycle.isRunning, rounds < 3, try database.access({ try $0.unacknowledgedOutcomes(limit: 1) }).isEmpty == false {
                // What the commands logged goes up before their acknowledgements: a kill's
                // acknowledgement takes the device out, and with it the right to upload.
                _ = try? await uploader.upload(reportingErrors: false)
                guard lifecycle.isRunning else { break }
                result = try await round()
                rounds += 1
            }
            if lifecycle.isRunning { try await subscriptions.syncChanges() }
            failures = 0
            await engine?.syncSucceeded()
            if lifecycle.isRunning {
                broadcaster.emit(.syncCompleted(result))
                uploader.requestUpload()
            }
            return result
        } catch {
            failures += 1
            if let error = error as? BackplaneClientError { await engine?.report(error) }
            throw error
        }
    }

    /// One `POST /v1/sync`: send unacknowledged outcomes, record the answer, finish what the
    /// acknowledgements finish (kill, unregister), execute new commands.
    private func round() async throws -> SyncResult {
        // Registered first, so that the round trip timed below is the sync's alone.
        _ = try await session.credentials()
        let pending = try database.access { try $0.unacknowledgedOutcomes(limit: WireLimits.maxAcksPerSync) }
        let grantReports = try database.access { try $0.pendingGrantReports(limit: WireLimits.maxDownloadReportsPerSync) }
        // The SDK's version goes with every sync: an app update brings a new SDK without a new
        // registration, and the backplane sends a command only to an SDK that knows its type.
        // The licenses held go with every sync, to be renewed or ended (none: nothing is sent).
        let licenses = try database.access { try $0.heldLicenses() }
        let report = SyncRequest(
            sdkVersion: BackplaneSDK.version, appVersion: configuration.device.appVersion, osVersion: configuration.device.osVersion,
            acks: pending.isEmpty ? nil : pending.map(\.ack), downloadReports: grantReports.isEmpty ? nil : grantReports,
            licenses: licenses)
        let sentAt = Date()
        let sentMonotonic = trustedClock.monotonicNow
        let response = try await session.request { api, credentials in try await api.sync(report, as: credentials) }
        let receivedAt = Date()
        clock.observe(serverTime: response.serverTime, sentAt: sentAt, receivedAt: receivedAt)
        if WireLimits.acceptedDates.contains(response.serverTime) {
            trustedClock.synced(serverTime: response.serverTime, roundTrip: trustedClock.monotonicNow - sentMonotonic)
        }
        try snapshot.record(device: response.device, settings: response.settings, serverTime: response.serverTime, syncedAt: receivedAt)

        // Every answered ack is settled: accepted and duplicate are recorded server-side, and a
        // rejected one never will be.
        let answered = Dictionary(response.ackResults.map { ($0.commandId, $0.status) }, uniquingKeysWith: { first, _ in first })
        try database.access { try $0.markAcknowledged(Array(answered.keys)) }
        // So is every answered download report: the backplane records it, or never will.
        try database.access { try $0.settleGrantReports(response.downloadReportResults, sent: grantReports) }
        // Renewed licenses take their new end; ended ones lose their keys (`licenseExpired`).
        if let renewals = response.licenseRenewals { try database.access { try $0.applyLicenseRenewals(renewals) } }
        let finishing = pending.first { outcome in
            (outcome.type == .kill || outcome.type == .unregister) && outcome.ack.outcome == .succeeded
                && [.accepted, .duplicate].contains(answered[outcome.ack.commandId])
        }
        if let finishing {
            await engine?.deviceLeft(after: finishing.type)
        } else {
            try await commands.execute(response.commands)
        }
        return SyncResult(
            device: response.device, settings: response.settings, serverTime: response.serverTime,
            syncedAt: receivedAt, clockOffset: clock.offset)
    }

    /// Syncs after each interval or wake-up, sooner after failures; stops for what retrying
    /// cannot fix.
    private func run() async {
        while lifecycle.isRunning, !Task.isCancelled {
            let delay = failures == 0 ? configuration.sync.interval : configuration.sync.retry.delay(afterFailures: failures)
            _ = await wake.wait(upTo: delay)
            guard lifecycle.isRunning, !Task.isCancelled else { return }
            do {
                _ = try await sync()
            } catch let error as BackplaneClientError where error.isInvalidCredentials || error.code == .deviceAlreadyRegistered {
                // Retrying cannot fix these; the app was told through events.
                await engine?.stopAfterPermanentFailure()
                return
            } catch {
                // Reported; the next pass backs off.
            }
        }
    }
}
