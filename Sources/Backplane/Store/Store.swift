import Foundation
import Shared

// Records are what the store keeps; they are not wire types. Services map them to Shared types.

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
    }

    /// Given an ack and the command it names (nil when there is none in the application).
    public var applyAck: @Sendable (CommandAck, CommandRecord?) -> AckDecision
    /// An open command about to be sent: mark it delivered, or expired.
    public var deliver: @Sendable (CommandRecord) -> CommandRecord
    /// What detaching the device does to its row.
    public var detach: @Sendable (DeviceRecord) -> DeviceRecord
}

/// What a device mutation sees, read inside the store's transaction so that a decision taken
/// on it (the device limit) cannot be invalidated by a concurrent request.
public struct DeviceLimitState: Sendable {
    public var settings: ApplicationSettings
    /// Registered, download-enabled devices of the user in question, not counting the device itself.
    public var otherEnabledDevices: Int
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

/// A signed request's nonce, to be recorded once (replay protection), and the device to mark seen.
public struct SignedRequestRecord: Sendable, Equatable {
    public var keyId: String
    public var nonce: String
    /// Kept until its timestamp can no longer pass the freshness check.
    public var expiresAt: Date
    public var applicationId: String
    public var deviceId: String?
    public var now: Date

    public init(keyId: String, nonce: String, expiresAt: Date, applicationId: String, deviceId: String?, now: Date) {
        self.keyId = keyId
        self.nonce = nonce
        self.expiresAt = expiresAt
        self.applicationId = applicationId
        self.deviceId = deviceId
        self.now = now
    }
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
    public var includeUnregistered: Bool

    public init(userId: String? = nil, externalDeviceId: String? = nil, includeUnregistered: Bool = false) {
        self.userId = userId
        self.externalDeviceId = externalDeviceId
        self.includeUnregistered = includeUnregistered
    }
}

/// Persistence of the backplane. Implementations own the SQL and the transactions; the rules
/// (the device limit, who may do what) are passed in as closures by the services and evaluated
/// inside one transaction, so every check-and-set is atomic whatever the implementation. The
/// guarantees every implementation keeps (atomic device limit, nonces, command states, a change
/// log numbered in commit order, event idempotency, durability) are the store contract in
/// docs/architecture.md.
public protocol BackplaneStore: Sendable {
    /// True when the database answers a trivial query.
    func isReachable() async -> Bool

    // MARK: applications, keys, tokens
    func createApplication(_ application: ApplicationRecord, key: AppKeyRecord) async throws
    func application(id: String) async throws -> ApplicationRecord?
    func applications() async throws -> [ApplicationRecord]
    func updateSettings(applicationId: String, _ change: @Sendable (ApplicationSettings) throws -> ApplicationSettings) async throws -> ApplicationSettings?

    func addAppKey(_ key: AppKeyRecord) async throws
    func appKey(id: String) async throws -> AppKeyRecord?
    func appKeys(applicationId: String) async throws -> [AppKeyRecord]
    /// Sets `revokedAt` once `check` (given the application's unrevoked keys) allows it. Nil when the key is unknown.
    func revokeAppKey(applicationId: String, keyId: String, at: Date, check: @Sendable ([AppKeyRecord]) throws -> Void) async throws -> AppKeyRecord?

    func createToken(_ token: TokenRecord) async throws
    func token(hash: String) async throws -> TokenRecord?

    // MARK: signed requests
    /// Records a nonce for a key until `expiresAt`. False when it was already recorded (a replay).
    /// When `deviceId` is given, also marks that device as seen at `now`.
    func recordSignedRequest(_ request: SignedRequestRecord) async throws -> Bool
    /// Forgets nonces that expired before `date`; returns how many.
    func pruneNonces(expiredBefore date: Date) async throws -> Int

    // MARK: devices
    func device(applicationId: String, deviceId: String) async throws -> DeviceRecord?
    /// The registered devices of a user, in registration order.
    func devices(applicationId: String, userId: String) async throws -> [DeviceRecord]
    /// A page of devices with `rowId` greater than `afterRowId`, in `rowId` order.
    func devices(applicationId: String, filter: DeviceFilter, afterRowId: Int64?, limit: Int) async throws -> [DeviceRecord]

    /// Inserts or replaces the device row decided by `decide`, in one transaction with the read of `RegistrationState`.
    func registerDevice<Decision: Sendable>(
        applicationId: String, deviceId: String, userId: String,
        decide: @Sendable (RegistrationState) throws -> (DeviceRecord, Decision)
    ) async throws -> (DeviceRecord, Decision)

    // MARK: commands
    func insertCommands(_ commands: [CommandRecord]) async throws -> [CommandRecord]
    func command(applicationId: String, commandId: String) async throws -> CommandRecord?
    /// A device's commands in delivery order.
    func commands(applicationId: String, deviceId: String) async throws -> [CommandRecord]
    /// Replaces a command with what `change` returns, in one transaction. Nil when there is none.
    func updateCommand(
        applicationId: String, commandId: String, _ change: @Sendable (CommandRecord) throws -> CommandRecord
    ) async throws -> CommandRecord?
    /// One transaction: applies the acknowledgements, then delivers the device's open commands.
    /// Returns the ack results and the commands still open after delivery, in delivery order.
    func syncCommands(
        applicationId: String, deviceId: String, acks: [CommandAck], rules: CommandSyncRules
    ) async throws -> (results: [CommandAckResult], open: [CommandRecord])

    // MARK: feeds, episodes, subscriptions
    /// Creates or replaces a feed (undeleting it). Returns the row and whether it was new.
    func upsertFeed(_ feed: FeedRecord) async throws -> (FeedRecord, created: Bool)
    func feed(applicationId: String, feedId: String) async throws -> FeedRecord?
    /// Live (not deleted) feeds, by feed id.
    func feeds(applicationId: String) async throws -> [FeedRecord]
    /// Marks the feed deleted and retracts its live episodes, in one transaction. False when unknown.
    func deleteFeed(applicationId: String, feedId: String, at: Date) async throws -> Bool
    /// One transaction: loads the feed's episodes with these asset ids (retracted ones too), asks
    /// `plan` what to write, writes it and appends one change per write to the change log.
    func writeEpisodes(
        applicationId: String, feedId: String, assetIds: [String],
        _ plan: @Sendable ([String: EpisodeRecord]) throws -> [EpisodeWrite]
    ) async throws -> [EpisodeWrite]
    /// One episode, live or retracted.
    func episode(applicationId: String, feedId: String, assetId: String) async throws -> EpisodeRecord?
    /// Live episodes of a feed, newest announcement first.
    func episodes(applicationId: String, feedId: String, limit: Int?) async throws -> [EpisodeRecord]
    /// Live episodes updated at or after `since` in the given feeds (all when nil), oldest update
    /// first, after the (updatedAt, feedId, assetId) key `after`.
    func episodes(
        applicationId: String, updatedSince since: Date, feedIds: [String]?, after: EpisodeKey?, limit: Int
    ) async throws -> [EpisodeRecord]

    /// Creates or updates a subscription; a new one records the change log position, in the same
    /// transaction as reading the feed's current episodes (newest first, at most `initialLimit`).
    func subscribe(
        _ subscription: SubscriptionRecord, initialLimit: Int?
    ) async throws -> (SubscriptionRecord, created: Bool, episodes: [EpisodeRecord])
    func unsubscribe(applicationId: String, deviceId: String, feedId: String) async throws -> Bool
    func subscriptions(applicationId: String, deviceId: String) async throws -> [SubscriptionRecord]
    /// Devices subscribed to a feed.
    func subscriberIds(applicationId: String, feedId: String) async throws -> [String]
    /// Changes after `afterSeq` in the device's subscribed feeds (each after its subscription's
    /// `sinceSeq`), in sequence order. Sequence numbers count each application's changes from 1.
    func changes(applicationId: String, deviceId: String, afterSeq: Int64, limit: Int) async throws -> [EpisodeChangeRecord]
    /// The application's sequence number standing for `legacySeq`, a number from the change log
    /// shared by all applications before migration v6 (the last change at or before it; 0 if none).
    func changeSeq(applicationId: String, legacySeq: Int64) async throws -> Int64

    // MARK: events
    /// One transaction: records the upload's signed request when given (throwing
    /// `NonceReusedError` for a replay, keeping nothing), then stores each event unless its
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

    /// Replaces an existing device row with what `change` returns, in one transaction with the read of
    /// the row and its user's `DeviceLimitState`. Nil when no such device exists.
    func updateDevice(
        applicationId: String, deviceId: String,
        _ change: @Sendable (DeviceRecord, DeviceLimitState) throws -> DeviceRecord
    ) async throws -> DeviceRecord?
}
