import Foundation
import BackplaneWire

/// Sends the event log's durable queue to the backplane: in batches, when enough events are
/// queued, when the oldest is old enough, when asked (start, after a sync, `uploadEvents()`), and
/// with backoff while uploads fail. One upload at a time; a request during one joins it. An event
/// leaves the queue only once the backplane answered for it.
actor EventUploader {
    /// What the uploader needs from the engine, so that it owns nothing else.
    struct Dependencies: Sendable {
        let store: LocalStore
        let options: EventLogOptions
        let retry: RetryPolicy
        let broadcaster: EventBroadcaster
        /// Sends one batch as the registered device (registering or recovering credentials first).
        let send: @Sendable (EventBatch) async throws -> EventBatchResponse
        /// Whether the engine runs: an upload stops between batches when it no longer does.
        let isRunning: @Sendable () async -> Bool
        /// Whether the device is registered: the loop waits for that before it uploads on its own.
        let isRegistered: @Sendable () async -> Bool
        /// Hands an error to the engine, which turns it into events and state.
        let report: @Sendable (BackplaneClientError) async -> Void
    }

    private let dependencies: Dependencies
    private let wake = WakeSignal()
    private var loop: Task<Void, Never>?
    private var inFlight: Task<Int, any Error>?
    private var requested = true
    private var failures = 0
    private var retryAt: Date?
    /// The queue's size when the loop last read it, and events logged since: the loop is woken
    /// for the first event (to time its age) and at the threshold, not for every event.
    private var queuedAtCheck = 0
    private var queuedSinceCheck = 0

    init(_ dependencies: Dependencies) {
        self.dependencies = dependencies
    }

    func start() {
        guard loop == nil else { return }
        requested = true
        loop = Task { [weak self] in await self?.run() }
    }

    func stop() {
        loop?.cancel()
        loop = nil
    }

    /// Uploads everything queued now, batch after batch, and returns how many events the
    /// backplane confirmed. Joins an upload already under way.
    func upload(reportingErrors: Bool) async throws -> Int {
        if let inFlight { return try await inFlight.value }
        let task = Task { try await self.uploadQueue() }
        inFlight = task
        defer { inFlight = nil }
        do {
            return try await task.value
        } catch let error as BackplaneClientError {
            if reportingErrors { await dependencies.report(error) }
            throw error
        }
    }

    /// At most `limit` of uploading, for shutdown.
    func uploadBeforeShutdown(within limit: Duration) async {
        let upload = Task { try await self.upload(reportingErrors: false) }
        let timer = Task {
            try await Task.sleep(for: limit)
            upload.cancel()
        }
        _ = try? await upload.value
        timer.cancel()
    }

    /// Asks for an upload of what is queued, whatever the count and age.
    func request() {
        requested = true
        wake.signal()
    }

    /// The event logger queued an event.
    func eventQueued() {
        queuedSinceCheck += 1
        let queued = queuedAtCheck + queuedSinceCheck
        if queued == 1 || queued >= dependencies.options.uploadThreshold { wake.signal() }
    }

    private func uploadQueue() async throws -> Int {
        let store = dependencies.store
        var sent = 0
        var rejected: [EventResult] = []
        defer {
            if sent > 0 { dependencies.broadcaster.emit(.logsSent(count: sent)) }
            if !rejected.isEmpty { dependencies.broadcaster.emit(.logsRejected(rejected)) }
        }
        while await dependencies.isRunning() {
            let batch = try Self.storage { try store.queuedEvents(limit: dependencies.options.batchSize) }
            guard !batch.isEmpty else { break }
            let response = try await dependencies.send(EventBatch(sentAt: Date(), events: batch))
            // Every answered event leaves the queue: accepted and duplicate are stored, and a
            // rejected one never will be.
            let answered = response.results.filter { batch.indices.contains($0.index) }
            guard !answered.isEmpty else {
                // The backplane answers every event of a batch. An answer naming none would leave
                // the queue as it is, and the uploader asking again at once, forever.
                throw BackplaneClientError(
                    kind: .invalidResponse, message: "The backplane's answer to an upload of \(batch.count) events named none of them.")
            }
            try Self.storage { try store.deleteQueuedEvents(answered.map { batch[$0.index].sequence }) }
            sent += answered.count { $0.status != .rejected }
            rejected += answered.filter { $0.status == .rejected }
        }
        return sent
    }

    /// Uploads when enough events are queued, when the oldest is old enough, or when asked;
    /// backs off while uploads fail.
    private func run() async {
        let options = dependencies.options, retry = dependencies.retry, store = dependencies.store
        while !Task.isCancelled {
            var wait: Duration?
            do {
                let (count, oldest) = try Self.storage { try store.eventQueueState() }
                (queuedAtCheck, queuedSinceCheck) = (count, 0)
                let age = oldest.map { Date().timeIntervalSince($0) } ?? 0
                let due = count > 0 && (requested || count >= options.uploadThreshold || age >= options.maxAge.seconds)
                if let retryAt, retryAt > Date() {
                    wait = .milliseconds(Int64(retryAt.timeIntervalSinceNow * 1000) + 1)
                } else if due, await dependencies.isRegistered() {
                    requested = false
                    do {
                        _ = try await upload(reportingErrors: true)
                        failures = 0
                        retryAt = nil
                    } catch {
                        failures += 1
                        requested = true
                        retryAt = Date().addingTimeInterval(retry.delay(afterFailures: failures).seconds)
                    }
                    continue
                } else if count > 0 {
                    wait = .milliseconds(Int64(max(options.maxAge.seconds - age, 0) * 1000) + 1)
                }
            } catch {
                failures += 1
                wait = retry.delay(afterFailures: failures)
            }
            // Until an event is queued, an upload is asked for, or `wait` passes (no limit when nil).
            _ = await wake.wait(upTo: wait)
        }
    }

    private static func storage<Value>(_ body: () throws -> Value) throws -> Value {
        do {
            return try body()
        } catch {
            throw BackplaneClientError(kind: .localStorage, message: "Could not use the SDK database.", underlying: error)
        }
    }
}
