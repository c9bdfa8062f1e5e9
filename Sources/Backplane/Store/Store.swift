import Foundation
import BackplaneWire

/// Persistence of the backplane: one protocol per aggregate, composed into `BackplaneStore`,
/// which the services use. Implementations own the SQL and the transactions; the rules (the
/// device limit, who may do what) are passed in as closures by the services and evaluated inside
/// one transaction, so every check-and-set is atomic whatever the implementation. The guarantees
/// every implementation keeps (atomic device limit, nonces, command states, a change log numbered
/// in commit order, event idempotency, durability) are the store contract in
/// docs/architecture.md.
public protocol BackplaneStore: ApplicationStore, NonceStore, DeviceStore, CommandStore, FeedStore, EventStore, DownloadGrantStore {
    /// True when the database answers a trivial query.
    func isReachable() async -> Bool
    /// Where the store reports its transactions' durations (`/metrics`).
    var transactionTimings: TransactionTimings { get }
}

/// Applications, their settings, app keys and bearer tokens.
public protocol ApplicationStore: Sendable {
    func createApplication(_ application: ApplicationRecord, key: AppKeyRecord) async throws
    func application(id: String) async throws -> ApplicationRecord?
    func applications() async throws -> [ApplicationRecord]
    func updateSettings(applicationId: String, _ change: @escaping @Sendable (ApplicationSettings) throws -> ApplicationSettings) async throws -> ApplicationSettings?

    func addAppKey(_ key: AppKeyRecord) async throws
    func appKey(id: String) async throws -> AppKeyRecord?
    func appKeys(applicationId: String) async throws -> [AppKeyRecord]
    /// Sets `revokedAt` once `check` (given the application's unrevoked keys) allows it. Nil when the key is unknown.
    func revokeAppKey(applicationId: String, keyId: String, at: Date, check: @escaping @Sendable ([AppKeyRecord]) throws -> Void) async throws -> AppKeyRecord?

    func createToken(_ token: TokenRecord) async throws
    func token(hash: String) async throws -> TokenRecord?
    /// The application's tokens, revoked and expired ones included, oldest first.
    func tokens(applicationId: String) async throws -> [TokenRecord]
    /// Sets `revokedAt` unless it is set already. Nil when the application has no such token.
    func revokeToken(applicationId: String, tokenId: String, at: Date) async throws -> TokenRecord?
    /// Writes when app keys and tokens were last used; a time older than the stored one changes nothing.
    func recordCredentialUse(keys: [String: Date], tokens: [String: Date]) async throws
}

/// Nonces of signed requests: each (key, nonce) is accepted once.
public protocol NonceStore: Sendable {
    /// Spends a nonce for a key until `expiresAt`. False when it was spent before (a replay). A
    /// store that keeps nonces in memory throws `SignedBeforeRestartError` for a timestamp from
    /// before it started, which it can no longer vouch for (SQLiteStore, `SpentNonces`).
    func recordSignedRequest(_ request: SignedRequestRecord) async throws -> Bool
    /// Forgets nonces that expired before `date`; returns how many.
    func pruneNonces(expiredBefore date: Date) async throws -> Int
    /// Nonces kept (replay protection's memory or table), for `/metrics`.
    func nonceCount() async throws -> Int
}

/// Devices. Registration and every change that can enable download read the user's
/// download-enabled count and write in one transaction: the device limit holds under concurrency.
public protocol DeviceStore: Sendable {
    func device(applicationId: String, deviceId: String) async throws -> DeviceRecord?
    /// The registered devices of a user, in registration order.
    func devices(applicationId: String, userId: String) async throws -> [DeviceRecord]
    /// A page of devices with `rowId` greater than `afterRowId`, in `rowId` order.
    func devices(applicationId: String, filter: DeviceFilter, afterRowId: Int64?, limit: Int) async throws -> [DeviceRecord]
    /// The application's registered devices, those enabled for download and those seen since
    /// `seenSince`, counted in one statement (a walk of the application's devices).
    func fleetSummary(applicationId: String, seenSince: Date) async throws -> FleetSummary

    /// Inserts or replaces the device row decided by `decide`, in one transaction with the read of
    /// `RegistrationState`. A device that moves to another user releases its download grants in it.
    func registerDevice<Decision: Sendable>(
        applicationId: String, deviceId: String, userId: String,
        decide: @escaping @Sendable (RegistrationState) throws -> (DeviceRecord, Decision)
    ) async throws -> (DeviceRecord, Decision)

    /// Replaces an existing device row with what `change` returns, in one transaction with the read of
    /// the row and its user's `DeviceLimitState`. Nil when no such device exists. A device this
    /// unregisters releases its download grants in the same transaction.
    func updateDevice(
        applicationId: String, deviceId: String,
        _ change: @escaping @Sendable (DeviceRecord, DeviceLimitState) throws -> DeviceRecord
    ) async throws -> DeviceRecord?

    /// Moves each device's `lastSeenAt` forward to the sighting's time (never back), in one
    /// transaction. Sightings of devices that do not exist change nothing.
    func recordLastSeen(_ sightings: [DeviceSighting]) async throws
}

/// The command queue. Open states are `pending` and `delivered`; a finished command never changes.
public protocol CommandStore: Sendable {
    func insertCommands(_ commands: [CommandRecord]) async throws -> [CommandRecord]
    func command(applicationId: String, commandId: String) async throws -> CommandRecord?
    /// A device's commands in delivery order.
    func commands(applicationId: String, deviceId: String) async throws -> [CommandRecord]
    /// A device and its open commands (pending and delivered, in delivery order), read in one
    /// store call: a sync's credential check and its quiet answer. Nil when there is no such
    /// device. (One statement on SQLite; on PostgreSQL two statements on one connection,
    /// which may see different commits, as two separate reads would.)
    func deviceWithOpenCommands(applicationId: String, deviceId: String) async throws -> (DeviceRecord, [CommandRecord])?
    /// A page of the application's commands matching `filter`, newest first, with `rowId` below
    /// `beforeRowId`. Each combination of filters is served by an index in page order.
    func commands(applicationId: String, filter: CommandFilter, beforeRowId: Int64?, limit: Int) async throws -> [CommandRecord]
    /// Marks at most `limit` open commands of any application whose `expiresAt` is at or before
    /// `now` as expired (`completedAt` their expiry), in one transaction; returns how many. A
    /// command being acknowledged or cancelled meanwhile keeps that outcome.
    func expireCommands(at now: Date, limit: Int) async throws -> Int
    /// How many of the application's commands are in each stored state (absent: none).
    func commandCounts(applicationId: String) async throws -> [CommandState: Int]
    /// Replaces a command with what `change` returns, in one transaction. Nil when there is none.
    func updateCommand(
        applicationId: String, commandId: String, _ change: @escaping @Sendable (CommandRecord) throws -> CommandRecord
    ) async throws -> CommandRecord?
    /// One transaction: applies the acknowledgements (with the download grants they release and
    /// the detaching of the device they ask for), then delivers the device's open commands.
    /// Returns the ack results and the commands still open after delivery, in delivery order.
    /// With `signedRequest`, it always writes, and spends that nonce with the same transaction
    /// (refusals as `recordSignedRequest`'s, changing nothing): the sync's one commit instead of two.
    func syncCommands(
        applicationId: String, deviceId: String, acks: [CommandAck], rules: CommandSyncRules, signedRequest: SignedRequestRecord?
    ) async throws -> (results: [CommandAckResult], open: [CommandRecord])
}

/// Feeds, episodes, the change log and subscriptions. The change log is numbered per application
/// in commit order: a reader that has seen change N+1 has seen N (SQLite keeps it by having one
/// writer; a store with concurrent writers must serialise the numbering per application).
public protocol FeedStore: Sendable {
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
        _ plan: @escaping @Sendable ([String: EpisodeRecord]) throws -> [EpisodeWrite]
    ) async throws -> [EpisodeWrite]
    /// One episode, live or retracted.
    func episode(applicationId: String, feedId: String, assetId: String) async throws -> EpisodeRecord?
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
    /// How many devices are subscribed to a feed, counted in its index.
    func subscriberCount(applicationId: String, feedId: String) async throws -> Int
    /// Changes after `afterSeq` in the device's subscribed feeds (each after its subscription's
    /// `sinceSeq`), in sequence order. Sequence numbers count each application's changes from 1.
    func changes(applicationId: String, deviceId: String, afterSeq: Int64, limit: Int) async throws -> [EpisodeChangeRecord]
    /// The application's sequence number standing for `legacySeq`, a number from the change log
    /// shared by all applications before migration v6 (the last change at or before it; 0 if none).
    func changeSeq(applicationId: String, legacySeq: Int64) async throws -> Int64
}

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

/// Download grants and the keys that sign their entitlements. A grant is decided and recorded in
/// the transaction that counts the user's grants, so concurrent requests never exceed a limit.
public protocol DownloadGrantStore: Sendable {
    /// One transaction: reads the device, the settings, the counts, the policy and the episode of
    /// `assetId`, asks
    /// `decide`, and inserts the grant it returns, if any (nil keeps the held one). Throws
    /// `StoreError.unknownDevice` when there is no such device.
    func grantDownload<Decision: Sendable>(
        applicationId: String, deviceId: String, assetId: String,
        decide: @escaping @Sendable (DownloadPermissionState) throws -> (DownloadGrantRecord?, Decision)
    ) async throws -> Decision
    /// One transaction: for each report, in order, the grant it names (nil when the application
    /// has none) is given to `apply`, and the grant `apply` returns, if any, replaces it.
    func reportDownloads<Result: Sendable>(
        applicationId: String, reports: [DownloadReport],
        apply: @escaping @Sendable (DownloadReport, DownloadGrantRecord?) -> (DownloadGrantRecord?, Result)
    ) async throws -> [Result]
    func downloadGrant(applicationId: String, grantId: String) async throws -> DownloadGrantRecord?
    /// A page of grants of a user or a device (all when both are nil), newest first, before `beforeRowId`.
    func downloadGrants(
        applicationId: String, userId: String?, deviceId: String?, beforeRowId: Int64?, limit: Int
    ) async throws -> [DownloadGrantRecord]
    /// Takes the user's downloads of the asset out of its lifetime count; returns how many, or
    /// nil when the user was never granted the asset.
    func resetLifetimeDownloads(applicationId: String, userId: String, assetId: String, at: Date) async throws -> Int?

    /// Creates or replaces an asset's policy.
    func setAssetPolicy(_ record: AssetPolicyRecord) async throws
    func assetPolicy(applicationId: String, assetId: String) async throws -> AssetPolicyRecord?
    /// False when there was none.
    func deleteAssetPolicy(applicationId: String, assetId: String) async throws -> Bool

    /// The application's unretired entitlement keys, newest first. When there is none, `make`
    /// (if given) creates the first one in the same transaction.
    func entitlementKeys(
        applicationId: String, orCreate make: (@Sendable () -> EntitlementKeyRecord)?
    ) async throws -> [EntitlementKeyRecord]
    /// Adds a key that becomes the signing key.
    func addEntitlementKey(_ key: EntitlementKeyRecord) async throws
    /// Retires a key (tokens it signed stop verifying). Nil when the key is unknown.
    func retireEntitlementKey(applicationId: String, keyId: String, at: Date) async throws -> EntitlementKeyRecord?
}
