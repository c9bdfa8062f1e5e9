import Foundation
import BackplaneWire

// The engine's side of event upload; the work is `EventUploader`'s.
extension BackplaneEngine {
    /// Uploads the queued events now, batch after batch until the queue is empty, and returns
    /// how many the backplane confirmed. Joins an upload already under way.
    @discardableResult
    public func uploadEvents() async throws -> Int {
        try await uploadEvents(reportingErrors: true)
    }

    func uploadEvents(reportingErrors: Bool) async throws -> Int {
        try requireRunning()
        guard let uploader else { throw BackplaneClientError(kind: .notRunning, message: "The engine is not started.") }
        return try await uploader.upload(reportingErrors: reportingErrors)
    }

    /// Asks the uploader to send what is queued, whatever the count and age.
    func requestEventUpload() {
        guard let uploader else { return }
        Task { await uploader.request() }
    }

    func startUploader() {
        guard uploader == nil, let local else { return }
        let uploader = EventUploader(EventUploader.Dependencies(
            store: local, options: configuration.eventLog, retry: configuration.sync.retry, broadcaster: broadcaster,
            send: { [weak self] batch in
                guard let self else { throw BackplaneClientError(kind: .notRunning, message: "The engine is gone.") }
                return try await self.send(batch)
            },
            isRunning: { [weak self] in await self?.state == .running },
            isRegistered: { [weak self] in await self?.registration != nil },
            report: { [weak self] error in await self?.report(error) }))
        self.uploader = uploader
        eventLogger.onQueued { Task { await uploader.eventQueued() } }
        Task { await uploader.start() }
    }

    func stopUploader() {
        eventLogger.onQueued(nil)
        if let uploader { Task { await uploader.stop() } }
        uploader = nil
    }

    /// One batch, as the registered device.
    private func send(_ batch: EventBatch) async throws -> EventBatchResponse {
        try requireRunning()
        let credentials = try await ensureRegistered()
        return try await withCredentialRecovery(credentials) { api, credentials in
            try await api.uploadEvents(batch, as: credentials)
        }
    }
}
