import Foundation
import BackplaneWire

// Event upload: batches from the durable queue, by count, by age, after syncs and at shutdown.
extension BackplaneEngine {
    // MARK: event upload

    /// Uploads the queued events now, batch after batch until the queue is empty, and returns
    /// how many the backplane confirmed. Joins an upload already under way.
    @discardableResult
    public func uploadEvents() async throws -> Int {
        try await uploadEvents(reportingErrors: true)
    }

    func uploadEvents(reportingErrors: Bool) async throws -> Int {
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

    func performUpload() async throws -> Int {
        var sent = 0
        var rejected: [EventResult] = []
        defer {
            if sent > 0 { broadcaster.emit(.logsSent(count: sent)) }
            if !rejected.isEmpty { broadcaster.emit(.logsRejected(rejected)) }
        }
        while state == .running {
            let batch = try storage { try $0.queuedEvents(limit: configuration.eventLog.batchSize) }
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

    func uploadEventsBeforeShutdown(within limit: Duration) async {
        let upload = Task { try await self.uploadEvents(reportingErrors: false) }
        let timer = Task {
            try await Task.sleep(for: limit)
            upload.cancel()
        }
        _ = try? await upload.value
        timer.cancel()
    }

    /// Asks the uploader to send what is queued, whatever the count and age.
    func requestEventUpload() {
        uploadRequested = true
        uploadWake.signal()
    }

    func eventQueued() {
        queuedSinceCheck += 1
        let queued = queuedAtCheck + queuedSinceCheck
        if queued == 1 || queued >= configuration.eventLog.uploadThreshold { uploadWake.signal() }
    }

    func startUploader() {
        guard uploader == nil else { return }
        eventLogger.onQueued { [weak self] in
            Task { await self?.eventQueued() }
        }
        uploadRequested = true
        uploader = Task { [weak self] in await self?.runUploader() }
    }

    func stopUploader() {
        eventLogger.onQueued(nil)
        uploader?.cancel()
        uploader = nil
    }

    /// Uploads when enough events are queued, when the oldest is old enough, or when asked
    /// (start, after a sync); backs off while uploads fail.
    func runUploader() async {
        while state == .running, !Task.isCancelled {
            var wait: Duration?
            do {
                let (count, oldest) = try storage { try $0.eventQueueState() }
                (queuedAtCheck, queuedSinceCheck) = (count, 0)
                let age = oldest.map { Date().timeIntervalSince($0) } ?? 0
                let due = count > 0 && (uploadRequested || count >= configuration.eventLog.uploadThreshold || age >= configuration.eventLog.maxAge.seconds)
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
                        uploadRetryAt = Date().addingTimeInterval(configuration.sync.retry.delay(afterFailures: uploadFailures).seconds)
                    }
                    continue
                } else if count > 0 {
                    wait = .milliseconds(Int64(max(configuration.eventLog.maxAge.seconds - age, 0) * 1000) + 1)
                }
            } catch {
                uploadFailures += 1
                wait = configuration.sync.retry.delay(afterFailures: uploadFailures)
            }
            // Until an event is queued, an upload is asked for, or `wait` passes (no limit when nil).
            _ = await uploadWake.wait(upTo: wait)
        }
    }
}
