import Foundation

// Moving events: the upload batch and what became of each event, and the reporting API's
// answers. The events themselves are in `Events.swift`.

/// `POST /v1/events`.
public struct EventBatch: Codable, Sendable, Equatable {
    /// When the device sent the batch, by its clock: the backplane compares it with its own
    /// time to correct every event's device time.
    public var sentAt: Date
    public var events: [DeviceEvent]

    public init(sentAt: Date, events: [DeviceEvent]) {
        self.sentAt = sentAt
        self.events = events
    }
}

/// An `EventBatch` as the backplane reads it: an event that does not decode is kept as a
/// problem, so one bad event is refused alone and the rest of the batch is still stored.
public struct ReceivedEventBatch: Decodable, Sendable {
    public enum Entry: Sendable {
        case event(DeviceEvent)
        /// The event did not decode; the message says why, and its sequence number when readable.
        case undecodable(sequence: Int64?, message: String)
    }

    public var sentAt: Date
    public var events: [Entry]

    private enum CodingKeys: String, CodingKey { case sentAt, events }

    /// Decoding an element always succeeds, so the array decoder moves on to the next one.
    private struct Attempt: Decodable {
        var entry: Entry
        private enum SequenceKey: String, CodingKey { case sequence }

        init(from decoder: Decoder) throws {
            do {
                entry = .event(try DeviceEvent(from: decoder))
            } catch let error as DecodingError {
                let sequence = try? decoder.container(keyedBy: SequenceKey.self).decodeIfPresent(Int64.self, forKey: .sequence)
                entry = .undecodable(
                    sequence: sequence ?? nil, message: DecodingProblem.message(error, subject: "The event", relativeTo: decoder.codingPath))
            }
        }
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        sentAt = try container.decode(Date.self, forKey: .sentAt)
        events = try container.decode([Attempt].self, forKey: .events).map(\.entry)
    }
}

/// What became of one event of a batch.
public struct EventResult: Codable, Sendable, Equatable {
    public struct Status: WireVocabulary {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// Stored now.
        public static let accepted = Status(rawValue: "accepted")
        /// Stored before (same device and sequence): nothing changed. Delete it from the queue.
        public static let duplicate = Status(rawValue: "duplicate")
        /// Refused for good (`code`, `message`): retrying the same event cannot succeed.
        public static let rejected = Status(rawValue: "rejected")
        public static let allCases: [Status] = [.accepted, .duplicate, .rejected]
    }

    /// Position in the batch.
    public var index: Int
    public var sequence: Int64?
    public var status: Status
    public var code: ErrorCode?
    public var message: String?
    public var field: String?

    public init(index: Int, sequence: Int64?, status: Status, code: ErrorCode? = nil, message: String? = nil, field: String? = nil) {
        self.index = index
        self.sequence = sequence
        self.status = status
        self.code = code
        self.message = message
        self.field = field
    }
}

/// The answer to `POST /v1/events`: one result per event, in batch order.
public struct EventBatchResponse: Codable, Sendable, Equatable {
    public var serverTime: Date
    /// Server time minus the batch's `sentAt`, in seconds: what was added to each device time.
    public var clockSkewSeconds: Double
    public var accepted: Int
    public var duplicates: Int
    public var rejected: Int
    public var results: [EventResult]

    public init(serverTime: Date, clockSkewSeconds: Double, results: [EventResult]) {
        self.serverTime = serverTime
        self.clockSkewSeconds = clockSkewSeconds
        self.results = results
        self.accepted = results.count { $0.status == .accepted }
        self.duplicates = results.count { $0.status == .duplicate }
        self.rejected = results.count { $0.status == .rejected }
    }
}

/// An event as the reporting API shows it: what the device sent, which device, and the three times.
public struct StoredEvent: Codable, Sendable, Equatable {
    public var deviceId: String
    public var event: DeviceEvent
    /// When the backplane received it.
    public var receivedAt: Date
    /// The device time moved by the batch's clock skew: the best estimate of when it happened.
    public var correctedTime: Date

    public init(deviceId: String, event: DeviceEvent, receivedAt: Date, correctedTime: Date) {
        self.deviceId = deviceId
        self.event = event
        self.receivedAt = receivedAt
        self.correctedTime = correctedTime
    }

    private enum CodingKeys: String, CodingKey { case deviceId, receivedAt, correctedTime }

    /// Flat: the event's fields next to these three.
    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        deviceId = try container.decode(String.self, forKey: .deviceId)
        receivedAt = try container.decode(Date.self, forKey: .receivedAt)
        correctedTime = try container.decode(Date.self, forKey: .correctedTime)
        event = try DeviceEvent(from: decoder)
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(deviceId, forKey: .deviceId)
        try container.encode(receivedAt, forKey: .receivedAt)
        try container.encode(correctedTime, forKey: .correctedTime)
        try event.encode(to: encoder)
    }
}

/// `GET /v1/reports/events`: a page, oldest corrected time first.
public struct EventPage: Codable, Sendable, Equatable {
    public var events: [StoredEvent]
    /// Pass back as `cursor` for the next page; absent on the last page.
    public var nextCursor: String?

    public init(events: [StoredEvent], nextCursor: String?) {
        self.events = events
        self.nextCursor = nextCursor
    }
}

/// `GET /v1/reports/events/counts`: events per UTC day (of the corrected time) and type.
public struct EventCounts: Codable, Sendable, Equatable {
    public struct Row: Codable, Sendable, Equatable {
        /// `YYYY-MM-DD`, UTC.
        public var day: String
        public var type: EventType
        public var count: Int

        public init(day: String, type: EventType, count: Int) {
            self.day = day
            self.type = type
            self.count = count
        }
    }

    public var counts: [Row]

    public init(counts: [Row]) {
        self.counts = counts
    }
}
