import Foundation
import BackplaneWire

/// The event log: batch ingestion from devices (exactly once per device and sequence number,
/// with the device clock corrected) and the reporting queries.
public struct EventService: Sendable {
    let store: any BackplaneStore
    /// Where a signed upload's device is noted as seen.
    var lastSeen: LastSeenLog? = nil
    var metrics: BackplaneMetrics = .none
    let now: @Sendable () -> Date

    /// A device's signed upload: its nonce is spent with the events, in one transaction, and the
    /// device is noted as seen once it is accepted.
    func ingest(_ signed: SignedRequest, _ batch: ReceivedEventBatch) async throws -> EventBatchResponse {
        let device = signed.device
        let response = try await ingest(
            applicationId: device.applicationId, deviceId: device.deviceId, userId: signed.record.userId, batch, signedRequest: signed.nonce)
        lastSeen?.saw(applicationId: device.applicationId, deviceId: device.deviceId, at: now())
        return response
    }

    /// Stores what is valid in a batch and answers one result per event, in order. Only a batch
    /// that is unusable as a whole (too many events) is refused with an error.
    ///
    /// `signedRequest`, when given, is recorded in the same transaction as the events (replay
    /// protection without a second commit); a replay is refused with `nonce_reused`.
    ///
    /// `userId`, when given, is the user the device is bound to: an event that names another is
    /// rejected (`validation_failed`, field `userId`) and never stored, since a device logs for
    /// its own user only.
    public func ingest(
        applicationId: String, deviceId: String, userId: String? = nil, _ batch: ReceivedEventBatch,
        signedRequest: SignedRequestRecord? = nil
    ) async throws -> EventBatchResponse {
        guard batch.events.count <= WireLimits.maxEventsPerBatch else {
            throw ServiceError(.validationFailed,
                "A batch holds at most \(WireLimits.maxEventsPerBatch) events; this one has \(batch.events.count). Nothing was stored.",
                details: ["field": .string("events"), "maxEvents": .int(Int64(WireLimits.maxEventsPerBatch))])
        }
        guard WireLimits.acceptedDates.contains(batch.sentAt) else {
            throw ServiceError.validation(WireLimits.dateOutOfRangeMessage(field: "sentAt") + " Nothing was stored.", field: "sentAt")
        }
        let receivedAt = now()
        // The batch left the device at `sentAt` by its clock and arrived now by ours; the
        // difference (network time included, usually well under a second) is the device's error.
        let skew = receivedAt.timeIntervalSince(batch.sentAt)
        var results = [EventResult?](repeating: nil, count: batch.events.count)
        var records: [EventRecord] = []
        var positions: [Int] = []
        for (index, entry) in batch.events.enumerated() {
            switch entry {
            case .undecodable(let sequence, let message):
                results[index] = EventResult(index: index, sequence: sequence, status: .rejected, code: .badRequest, message: message)
            case .event(let event):
                if let problem = event.problem {
                    results[index] = EventResult(
                        index: index, sequence: event.sequence, status: .rejected, code: .validationFailed,
                        message: problem.message, field: problem.field)
                    continue
                }
                if let userId, event.userId != userId {
                    results[index] = EventResult(
                        index: index, sequence: event.sequence, status: .rejected, code: .validationFailed,
                        message: "'userId' is not the user this device is registered to; a device logs events for its own user only.",
                        field: "userId")
                    continue
                }
                // Nothing happens after it is received: a corrected time past that is estimation error.
                let corrected = min(event.deviceTime.addingTimeInterval(skew), receivedAt)
                // Both dates are in range (checked above and by `problem`), so the sum is finite;
                // but an event older than its batch by more than the time since 1970 lands before it.
                guard corrected >= WireLimits.acceptedDates.lowerBound else {
                    results[index] = EventResult(
                        index: index, sequence: event.sequence, status: .rejected, code: .validationFailed,
                        message: "'deviceTime' is \(Int64(batch.sentAt.timeIntervalSince(event.deviceTime))) s before the batch's 'sentAt'; "
                            + "corrected by the clock skew it would fall before 1970-01-01T00:00:00Z.",
                        field: "deviceTime")
                    continue
                }
                records.append(EventRecord(
                    applicationId: applicationId, deviceId: deviceId, event: event, receivedAt: receivedAt, correctedTime: corrected))
                positions.append(index)
            }
        }
        if !records.isEmpty || signedRequest != nil {
            let outcomes = try await answeringNonceRefusals {
                try await store.insertEvents(applicationId: applicationId, deviceId: deviceId, records, signedRequest: signedRequest)
            }
            for (position, (record, outcome)) in zip(positions, zip(records, outcomes)) {
                let sequence = record.event.sequence
                results[position] = switch outcome {
                case .inserted: EventResult(index: position, sequence: sequence, status: .accepted)
                case .duplicate: EventResult(index: position, sequence: sequence, status: .duplicate)
                case .sequenceReused:
                    EventResult(
                        index: position, sequence: sequence, status: .rejected, code: .conflict,
                        message: "Sequence \(sequence) was already used by another event of this device.", field: "sequence")
                }
            }
        }
        let answered = results.compactMap { $0 }
        metrics.count(.accepted, answered.count { $0.status == .accepted })
        metrics.count(.duplicate, answered.count { $0.status == .duplicate })
        metrics.count(.rejected, answered.count { $0.status == .rejected })
        return EventBatchResponse(serverTime: receivedAt, clockSkewSeconds: skew, results: answered)
    }

    public func list(applicationId: String, filter: EventFilter, cursor: String?, limit: Int?) async throws -> EventPage {
        let limit = try Validate.pageLimit(limit, default: WireLimits.defaultPageSize, max: WireLimits.maxPageSize)
        try Self.validate(filter)
        let after = try cursor.map(EventCursor.decode)
        // One extra row tells whether another page exists.
        let records = try await store.events(applicationId: applicationId, filter: filter, after: after, limit: limit + 1)
        let page = records.prefix(limit)
        let next = records.count > limit ? page.last.map { EventCursor.encode($0.key) } : nil
        return EventPage(events: page.map(Self.stored), nextCursor: next)
    }

    public func counts(applicationId: String, filter: EventFilter) async throws -> EventCounts {
        try Self.validate(filter)
        return EventCounts(counts: try await store.eventCounts(applicationId: applicationId, filter: filter))
    }

    /// Every matching event in listing order, a page at a time: memory stays at one page
    /// whatever the size of the log. `write` gets each page.
    public func export(
        applicationId: String, filter: EventFilter, pageSize: Int = 1000, write: ([StoredEvent]) async throws -> Void
    ) async throws {
        try Self.validate(filter)
        var after: EventKey?
        while true {
            let records = try await store.events(applicationId: applicationId, filter: filter, after: after, limit: pageSize)
            if !records.isEmpty { try await write(records.map(Self.stored)) }
            guard records.count == pageSize, let last = records.last else { return }
            after = last.key
        }
    }

    static func validate(_ filter: EventFilter) throws {
        try Validate.optionalText(filter.userId, field: "userId", maxLength: WireLimits.maxIdentifierLength)
        try Validate.optionalText(filter.deviceId, field: "deviceId", maxLength: WireLimits.maxIdentifierLength)
        try Validate.optionalText(filter.assetId, field: "assetId", maxLength: WireLimits.maxIdentifierLength)
        if let from = filter.from, let to = filter.to, from >= to {
            throw ServiceError.validation("'from' must be before 'to'.", field: "from")
        }
    }

    static func stored(_ record: EventRecord) -> StoredEvent {
        StoredEvent(deviceId: record.deviceId, event: record.event, receivedAt: record.receivedAt, correctedTime: record.correctedTime)
    }
}
