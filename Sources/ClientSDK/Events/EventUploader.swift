import Foundation
import Synchronization
import BackplaneWire

/// Uploads the durable event queue in batches: when enough events are queued, when the oldest is
/// old enough, when asked (at start and after each sync), and before shutdown; backs off while
/// uploads fail. An event leaves the queue only once the backplane has answered for it.
actor EventUploader {
    private let configuration: BackplaneClientConfiguration
    private let session: DeviceSession
    private let database: SDKDatabase
    private let eventLogger: EventLogger
    private let broadcaster: EventBroadcaster
    private let lifecycle: EngineLifecycle
    private weak let engine: (any EngineControl)?

    private var inFlight: Task<Int, any Error>?
    private var failures = 0
    private var retryAt: Date?
    /// Wakes the loop early: an event queued, an upload asked for.
    private let wake = WakeSignal()
    /// Set from any thread (the event logger's callback, the sync): what the loop goes by.
    private let triggers = Mutex(Triggers())
    private let loop = Mutex<Task<Void, Never>?>(nil)

    private struct Triggers {
        /// An upload of whatever is queued was asked for.
        var requested = false
        /// The queue's size when the loop last read it, and events logged since: the loop is
        /// woken for the first event (to time its age) and at the threshold, not for every event.
        var queuedAtCheck = 0
        var queuedSinceCheck = 0
    }

    init(
        configuration: BackplaneClientConfiguration, session: DeviceSession, database: SDKDatabase, eventLogger: EventLogger,
        broadcaster: EventBroadcaster, lifecycle: EngineLifecycle, engine: any EngineControl
    ) {
        self.configuration = configuration
        self.session = session
        self.database = database
        self.eventLogger = eventLogger
        self.broadcaster = broadcaster
        self.lifecycle = lifecycle
        self.engine = engine
    }

    /// Uploads the queued events now, batch after batch until the queue is empty, and returns how
    /// many the backplane confirmed. Joins an upload already under way.
    func upload(reportingErrors: Bool) async throws -> Int {
        try lifecycle.requireRunning()
        let started = inFlight == nil
        let task = inFlight ?? Task { try await self.perform() }
        inFlight = task
        defer { if started { inFlight = nil } }
        do {
            return try await task.value
        } catch let error as BackplaneClientError {
            // Reported once, by the caller that started the upload.
            if started, reportingErrors { await engine?.report(error) }
            throw error
        }
    }

    /// Uploads what is queued, waiting for it at most `limit`. An upload under way is left to
    /// finish: it may be a kill's log that must reach the backplane before its acknowledgement.
    func uploadBeforeShutdown(within limit: Duration) async {
        let upload = Task { try await self.upload(reportingErrors: false) }
        let timer = Task {
            try await Task.sleep(for: limit)
            upload.cancel()
        }
        _ = try? await upload.value
        timer.cancel()
    }

    /// Asks the loop to send what is queued, whatever the count and age.
    nonisolated func requestUpload() {
        triggers.withLock { $0.requested = true }
        wake.signal()
    }

    /// Starts the background loop; it uploads at once what is queued.
    nonisolated func start() {
        eventLogger.onQueued { [weak self] in self?.eventQueued() }
        triggers.withLock { $0.requested = true }
        loop.withLock { task in
            guard task == nil else { return }
            task = Task { [weak self] in await self?.run() }
        }
    }

    nonisolated func stop() {
        eventLogger.onQueued(nil)
        loop.withLock { task in
            task?.cancel()
            task = nil
        }
    }

    private nonisolated func eventQueued() {
        let threshold = configuration.eventLog.uploadThreshold
        let wakeNow = triggers.withLock { triggers in
            triggers.queuedSinceCheck += 1
            let queued = triggers.queuedAtCheck + triggers.queuedSinceCheck
            return queued == 1 || queued >= threshold
        }
        if wakeNow { wake.signal() }
    }

    private func perform() async throws -> Int {
        try await uploadBatches(choosing: { $0 }) { batch in
            try await session.request { api, credentials in try await api.uploadEvents(batch, as: credentials) }
        }
    }

    /// Before the device is registered for another user: the oldest queued events, as long as
    /// they are `userId`'s, go up with the credentials still held for that user. Best effort:
    /// what fails here goes with the next upload, where the backplane rejects it (a device logs
    /// for its own user only).
    func uploadQueued(ofUser userId: String, as credentials: DeviceCredentials) async {
        _ = try? await uploadBatches(choosing: { queued in Array(queued.prefix { $0.userId == userId }) }) { batch in
            try await session.api.uploadEvents(batch, as: credentials)
        }
    }

    /// Sends the queue's oldest events, a batch at a time, while `choosing` keeps any of the
    /// batch read, with `send`; every answered event leaves the queue (accepted and duplicate
    /// are stored, and a rejected one never will be). Emits what was sent and rejected; returns
    /// how many were taken.
    private func uploadBatches(
        choosing: ([DeviceEvent]) -> [DeviceEvent], send: (EventBatch) async throws -> EventBatchResponse
    ) async throws -> Int {
        var sent = 0
        var rejected: [EventResult] = []
        defer {
            if sent > 0 { broadcaster.emit(.logsSent(count: sent)) }
            if !rejected.isEmpty { broadcaster.emit(.logsRejected(rejected)) }
        }
        while lifecycle.isRunning {
            let batch = choosing(try database.access { try $0.queuedEvents(limit: configuration.eventLog.batchSize) })
            guard !batch.isEmpty else { break }
            let response = try await send(EventBatch(sentAt: Date(), events: batch))
            let answered = response.results.filter { batch.indices.contains($0.index) }
            guard !answered.isEmpty else {
                // The backplane answers every event of a batch. An answer naming none would leave
                // the queue as it is, and the uploader asking again at once, forever.
                throw BackplaneClientError(
                    kind: .invalidResponse, message: "The backplane's answer to an upload of \(batch.count) events named none of them.")
            }
            try database.access { try $0.deleteQueuedEvents(answered.map { batch[$0.index].sequence }) }
            sent += answered.count { $0.status != .rejected }
            rejected += answered.filter { $0.status == .rejected }
        }
        return sent
    }

    /// Uploads when due (count, age or asked) and the device is registered; otherwise sleeps
    /// until an event is queued, an upload is asked for, the oldest event comes of age or a
    /// backoff ends. Stops when the engine stops running.
    private func run() async {
        while lifecycle.isRunning, !Task.isCancelled {
            var wait: Duration?
            do {
                let (count, oldest) = try database.access { try $0.eventQueueState() }
                let requested = triggers.withLock { triggers in
                    (triggers.queuedAtCheck, triggers.queuedSinceCheck) = (count, 0)
                    return triggers.requested
                }
                let age = oldest.map { Date().timeIntervalSince($0) } ?? 0
                let maxAge = configuration.eventLog.maxAge.seconds
                let due = count > 0 && (requested || count >= configuration.eventLog.uploadThreshold || age >= maxAge)
                if let retryAt, retryAt > Date() {
                    wait = .milliseconds(Int64(retryAt.timeIntervalSinceNow * 1000) + 1)
                } else if count > 0, await session.isRegistered {
                    if due {
                        guard await uploadNow() else { return }
                        continue
                    }
                    // `age` comes from a date in the SDK database: held to a day either way.
                    wait = .milliseconds((Int64(nonNegative: min(maxAge - age, 86_400) * 1000) ?? 0) + 1)
                }
                // Otherwise nothing is queued, or there is no device to send it as yet: the sync
                // that registers asks for an upload.
            } catch {
                failures += 1
                wait = configuration.sync.retry.delay(afterFailures: failures)
            }
            _ = await wake.wait(upTo: wait)
        }
    }

    /// One due upload from the loop; false when the engine stopped under way, which is neither a
    /// success nor a failure.
    private func uploadNow() async -> Bool {
        triggers.withLock { $0.requested = false }
        do {
            _ = try await upload(reportingErrors: true)
            guard lifecycle.isRunning else { return false }
            failures = 0
            retryAt = nil
        } catch {
            guard lifecycle.isRunning else { return false }
            failures += 1
            triggers.withLock { $0.requested = true }
            retryAt = Date().addingTimeInterval(configuration.sync.retry.delay(afterFailures: failures).seconds)
        }
        return true
    }
}
