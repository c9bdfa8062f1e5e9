import Foundation
import BackplaneWire

// The plain values the store protocols take and return. Records are what the store keeps, not
// wire types (services map them to BackplaneWire types), and hold no database types: the GRDB
// conformances live in SQLiteSchema.swift.

public struct ApplicationRecord: Sendable, Equatable, Codable {
    public var id: String
    public var name: String
    public var settings: ApplicationSettings
    public var createdAt: Date
}

public struct AppKeyRecord: Sendable, Equatable, Codable {
    public var keyId: String
    public var applicationId: String
    /// Kept as is: verifying an HMAC needs the secret itself. Protect the data directory.
    public var secret: String
    public var createdAt: Date
    public var revokedAt: Date?
    /// As last written (`CredentialUseLog` keeps the newer times in memory for a few seconds).
    public var lastUsedAt: Date? = nil
}

public struct TokenRecord: Sendable, Equatable, Codable {
    public var id: String
    public var applicationId: String
    public var scope: TokenScope
    /// SHA-256 of the token; the token itself is shown once and never stored.
    public var tokenHash: String
    public var name: String
    public var createdAt: Date
    public var revokedAt: Date?
    /// Nil: valid until revoked.
    public var expiresAt: Date? = nil
    public var lastUsedAt: Date? = nil
}

public struct DeviceRecord: Sendable, Equatable, Codable {
    /// Store-assigned, increasing; the key of admin pagination. Nil before the first insert.
    public var rowId: Int64?
    public var applicationId: String
    public var deviceId: String
    public var userId: String
    public var externalDeviceId: String?
    public var nickname: String?
    public var platform: String
    public var model: String?
    public var osVersion: String?
    public var sdkVersion: String?
    public var appVersion: String?
    public var pushToken: String?
    public var downloadEnabled: Bool
    /// SHA-256 of the current device credential; empty once an admin released the device (no
    /// credential matches it, and the next registration of the id needs no proof).
    public var credentialHash: String
    /// The device key (base64url X9.63 P-256) recorded at registration; re-registering the device
    /// needs a proof by it. Nil for a device registered without one, or released.
    public var publicKey: String?
    public var registeredAt: Date
    public var updatedAt: Date
    public var lastSeenAt: Date
    public var unregisteredAt: Date?

    public var isRegistered: Bool { unregisteredAt == nil }
}

public struct CommandRecord: Sendable, Equatable, Codable {
    /// Store-assigned, increasing: the delivery order. Nil before the first insert.
    public var rowId: Int64?
    public var commandId: String
    public var applicationId: String
    public var deviceId: String
    public var type: CommandType
    public var assetIds: [String]?
    public var state: CommandState
    public var createdAt: Date
    public var updatedAt: Date
    public var expiresAt: Date?
    public var deliveredAt: Date?
    public var completedAt: Date?
    public var failureReason: String?
    public var deferrals: Int
}

public struct FeedRecord: Sendable, Equatable, Codable {
    public var applicationId: String
    public var feedId: String
    public var title: String
    public var metadata: [String: JSONValue]?
    public var createdAt: Date
    public var updatedAt: Date
    public var deletedAt: Date?
}

public struct EpisodeRecord: Sendable, Equatable, Codable {
    public var applicationId: String
    public var feedId: String
    public var assetId: String
    public var episode: EpisodeInput
    public var announcedAt: Date
    public var updatedAt: Date
    public var retractedAt: Date?
}

/// One write the service decided on: the episode's new row and the change it makes visible.
public struct EpisodeWrite: Sendable {
    public var record: EpisodeRecord
    public var kind: EpisodeChange.Kind
}

/// An entry of the change log: every episode write gets the next sequence number, in commit order.
public struct EpisodeChangeRecord: Sendable, Equatable {
    public var seq: Int64
    public var feedId: String
    public var assetId: String
    public var kind: EpisodeChange.Kind
    /// The episode as of this change (nil for a retraction).
    public var snapshot: EpisodeRecord?
}

public struct SubscriptionRecord: Sendable, Equatable, Codable {
    public var applicationId: String
    public var deviceId: String
    public var feedId: String
    public var maxItems: Int?
    public var autodeleteOldItems: Bool?
    /// The change log position when the device subscribed: the subscription's first answer
    /// carried the feed as of then, so changes at or before it are not sent again.
    public var sinceSeq: Int64
    public var subscribedAt: Date
    public var updatedAt: Date
}

/// How a sync's command section is processed, decided by the service and applied by the store
/// inside one transaction.
public struct CommandSyncRules: Sendable {
    public struct AckDecision: Sendable {
        /// The command to store in place of the old one, if it changes.
        public var updated: CommandRecord?
        public var result: CommandAckResult
        /// The acknowledged command takes the device out (kill, unregister): apply `detach`.
        public var detachesDevice: Bool
        /// The acknowledged command deleted downloads (wipe, delete assets): their grants end as `released`.
        public var releasesGrants: GrantRelease? = nil
    }

    /// Which of the device's download grants an acknowledged command ends.
    public enum GrantRelease: Sendable, Equatable {
        case all
        case assets([String])
    }

    /// Given an ack and the command it names (nil when there is none in the application).
    public var applyAck: @Sendable (CommandAck, CommandRecord?) -> AckDecision
    /// An open command about to be sent: mark it delivered, or expired.
    public var deliver: @Sendable (CommandRecord) -> CommandRecord
    /// What detaching the device does to its row.
    public var detach: @Sendable (DeviceRecord) -> DeviceRecord
    /// The time of the sync, for the grants it releases.
    public var now: Date
}

/// What a device mutation sees, read inside the store's transaction so that a decision taken
/// on it (the device limit) cannot be invalidated by a concurrent request.
public struct DeviceLimitState: Sendable {
    public var settings: ApplicationSettings
    /// Registered, download-enabled devices of the user in question, not counting the device itself.
    public var otherEnabledDevices: Int
    /// Registered devices of the user, enabled or not, not counting the device itself.
    public var otherRegisteredDevices: Int
}

public struct RegistrationState: Sendable {
    /// The row with this application and device id, registered or not.
    public var existing: DeviceRecord?
    /// Counted for the user the device is registering to.
    public var limit: DeviceLimitState
}

/// Position in a listing of episodes ordered by update time.
public struct EpisodeKey: Sendable, Equatable {
    public var updatedAt: Date
    public var feedId: String
    public var assetId: String

    public init(updatedAt: Date, feedId: String, assetId: String) {
        self.updatedAt = updatedAt
        self.feedId = feedId
        self.assetId = assetId
    }
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

/// A device's last signed request, for `DeviceStore.recordLastSeen`.
public struct DeviceSighting: Sendable, Equatable {
    public var applicationId: String
    public var deviceId: String
    public var at: Date

    public init(applicationId: String, deviceId: String, at: Date) {
        self.applicationId = applicationId
        self.deviceId = deviceId
        self.at = at
    }
}

/// A signed request's nonce, to be recorded once (replay protection).
public struct SignedRequestRecord: Sendable, Equatable {
    public var keyId: String
    public var nonce: String
    /// The request's signed timestamp (whole seconds).
    public var signedAt: Date
    /// When the server checked it: the SQLite store's nonce lease counts from it (`SpentNonces`).
    public var receivedAt: Date

    /// Kept until its timestamp can no longer pass the freshness check, and a minute more.
    public var expiresAt: Date { signedAt.addingTimeInterval(RequestSigning.allowedClockSkew + 60) }

    public init(keyId: String, nonce: String, signedAt: Date, receivedAt: Date) {
        self.keyId = keyId
        self.nonce = nonce
        self.signedAt = signedAt
        self.receivedAt = receivedAt
    }
}

/// A store refused an operation for a reason the caller should have prevented.
public enum StoreError: Error, CustomStringConvertible {
    case unknownApplication(String)
    case unknownDevice(String)

    public var description: String {
        switch self {
        case .unknownApplication(let id): "No application with id \(id)."
        case .unknownDevice(let id): "No device with id \(id)."
        }
    }
}

/// The database could not be reached, or dropped the connection mid-request: nothing was done,
/// or what was done is rolled back. Answered 503, so clients retry.
public struct StoreUnavailableError: Error, Sendable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { "The database is unavailable: \(reason)" }
}

/// The nonce of a request was recorded before: a replay. Nothing of the transaction was kept.
public struct NonceReusedError: Error, Sendable {
    public init() {}
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

public struct DeviceFilter: Sendable, Equatable {
    public var userId: String?
    public var externalDeviceId: String?
    /// Exact match: the console's find.
    public var nickname: String?
    public var includeUnregistered: Bool

    public init(userId: String? = nil, externalDeviceId: String? = nil, nickname: String? = nil, includeUnregistered: Bool = false) {
        self.userId = userId
        self.externalDeviceId = externalDeviceId
        self.nickname = nickname
        self.includeUnregistered = includeUnregistered
    }
}

extension CommandState {
    /// Stored state names with their counts (`commandCounts`, in either store); a name this
    /// version does not know is left out.
    static func counts(_ rows: [(String, Int)]) -> [CommandState: Int] {
        Dictionary(rows.compactMap { name, count in CommandState(rawValue: name).map { ($0, count) } }, uniquingKeysWith: +)
    }
}

/// Which commands a command list shows; nil fields match everything.
public struct CommandFilter: Sendable, Equatable {
    public var deviceId: String?
    public var state: CommandState?
    public var type: CommandType?

    public init(deviceId: String? = nil, state: CommandState? = nil, type: CommandType? = nil) {
        self.deviceId = deviceId
        self.state = state
        self.type = type
    }
}

/// The console overview's device figures, counted in one read.
public struct FleetSummary: Sendable, Equatable {
    public var registeredDevices: Int
    public var downloadEnabledDevices: Int
    /// Registered devices whose last accepted request is at or after the summary's `seenSince`.
    public var devicesSeenSince: Int

    public init(registeredDevices: Int, downloadEnabledDevices: Int, devicesSeenSince: Int) {
        self.registeredDevices = registeredDevices
        self.downloadEnabledDevices = downloadEnabledDevices
        self.devicesSeenSince = devicesSeenSince
    }
}
