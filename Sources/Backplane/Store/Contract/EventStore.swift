import Foundation
import BackplaneWire

/// The event log.
public protocol EventStore: Sendable {
    /// One transaction: spends the upload's signed request's nonce when given (throwing
    /// `NonceReusedError` for a replay, `SignedBeforeRestartError` as `recordSignedRequest`,
    /// keeping nothing), then stores each event unless its
    /// (device, sequence) is known, and says what became of each, in order. Sequence numbers at or
    /// below what retention removed for the device count as known, so a late retry is not stored
    /// again. One commit for both: an upload costs one fsync, not two.
    func insertEvents(
        applicationId: String, deviceId: String, _ events: [EventRecord], signedRequest: SignedRequestRecord?
    ) async throws -> [EventInsertOutcome]
    /// A page of events matching `filter`, ordered by (correctedTime, rowId), after `after`.
    func events(applicationId: String, filter: EventFilter, after: EventKey?, limit: Int) async throws -> [EventRecord]
    /// Matching events per UTC day of corrected time and type, by day then type.
    func eventCounts(applicationId: String, filter: EventFilter) async throws -> [EventCounts.Row]
    /// Deletes at most `limit` events whose corrected time is before `date`, in one short
    /// transaction, remembering per device the highest sequence removed. Returns how many.
    func deleteEvents(correctedBefore date: Date, limit: Int) async throws -> Int
}

/// One ingested event: what the device sent, which device, and the times the backplane adds.
public struct EventRecord: Sendable, Equatable {
    /// Store-assigned, increasing; breaks ties between equal corrected times. Nil before insert.
    public var rowId: Int64?
    public var applicationId: String
    public var deviceId: String
    public var event: DeviceEvent
    public var receivedAt: Date
    public var correctedTime: Date

    public init(rowId: Int64? = nil, applicationId: String, deviceId: String, event: DeviceEvent, receivedAt: Date, correctedTime: Date) {
        self.rowId = rowId
        self.applicationId = applicationId
        self.deviceId = deviceId
        self.event = event
        self.receivedAt = receivedAt
        self.correctedTime = correctedTime
    }

    /// Its position in the listing order.
    public var key: EventKey { EventKey(correctedTime: correctedTime, rowId: rowId ?? 0) }
}

/// What storing one event did.
public enum EventInsertOutcome: Sendable, Equatable {
    case inserted
    /// The device's sequence number was stored before with the same event id (or was already
    /// removed by retention): a retry.
    case duplicate
    /// The sequence number was stored before with another event id: the device reused it.
    case sequenceReused
}

/// Which events a report covers. Times are corrected times, `from` inclusive, `to` exclusive.
public struct EventFilter: Sendable, Equatable {
    public var type: EventType?
    public var userId: String?
    public var deviceId: String?
    public var assetId: String?
    public var from: Date?
    public var to: Date?

    public init(type: EventType? = nil, userId: String? = nil, deviceId: String? = nil, assetId: String? = nil, from: Date? = nil, to: Date? = nil) {
        self.type = type
        self.userId = userId
        self.deviceId = deviceId
        self.assetId = assetId
        self.from = from
        self.to = to
    }
}

/// Position in the event listing, ordered by corrected time then row id.
public struct EventKey: Sendable, Equatable {
    public var correctedTime: Date
    public var rowId: Int64

    public init(correctedTime: Date, rowId: Int64) {
        self.correctedTime = correctedTime
        self.rowId = rowId
    }
}
