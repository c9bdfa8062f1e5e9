import Foundation
import BackplaneWire

// Sync: one sync on demand (joined when one is under way), and the background loop that syncs at
// start, every interval and on wake-ups, backing off while the backplane cannot be reached.
extension BackplaneEngine {
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
        syncWake.signal()
    }

    func performSync() async throws -> SyncResult {
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
    func syncRound() async throws -> SyncResult {
        let credentials = try await ensureRegistered()
        let pending = try storage { try $0.unacknowledgedOutcomes(limit: WireLimits.maxAcksPerSync) }
        let report = SyncRequest(
            appVersion: configuration.device.appVersion, osVersion: configuration.device.osVersion,
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

    // MARK: the background loop

    func startLoop() {
        loop?.cancel()
        loop = Task { [weak self] in await self?.runLoop() }
    }

    func runLoop() async {
        while state == .running, !Task.isCancelled {
            let delay = consecutiveFailures == 0
                ? configuration.sync.interval
                : configuration.sync.retry.delay(afterFailures: consecutiveFailures)
            _ = await syncWake.wait(upTo: delay)
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
}
