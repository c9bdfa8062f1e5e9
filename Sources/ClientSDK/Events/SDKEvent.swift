import Foundation
import Synchronization
import BackplaneWire

/// What the SDK tells the app. Subscribe with `BackplaneEngine.events()`.
public enum SDKEvent: Sendable {
    /// The device is registered (`outcome` says whether it was new, existing, moved or reactivated).
    case registered(Device, outcome: RegistrationOutcome)
    /// The device id is registered to another user and `moveFromOtherUser` is off.
    case deviceAlreadyRegistered(deviceId: String)
    /// The user is at the device limit: this device is registered but may not download.
    /// `enabledCount` is known when the server said it.
    case deviceLimitReached(limit: Int, enabledCount: Int?)
    /// The app key is wrong or revoked. Nothing works until the app has a valid key.
    case invalidCredentials(BackplaneClientError)
    /// The backplane could not be reached; the engine retries with backoff.
    case communicationsFailure(BackplaneClientError)
    case syncCompleted(SyncResult)
    /// The backplane turned download on or off for this device (by request or by an admin).
    case downloadEnabledChanged(Bool)
    case settingsChanged(ApplicationSettings)
    /// The device was unregistered; the engine stops syncing. Start a new engine to register again.
    case unregistered
    /// A remote wipe (or kill) deleted every downloaded asset (the vendor's "reset").
    case remoteWipe(deletedAssetIds: [String])
    /// Assets were deleted (`deleteAssets` command: reason `remote`).
    case assetsDeleted(assetIds: [String], reason: AssetDeletionReason)
    /// A remote kill starts: the SDK wipes, unregisters and forgets its credential.
    case startingRemoteKill
    /// The remote kill is done and acknowledged; the engine is stopped.
    case remoteKill
    /// The wake-up channel opened (`true`) or closed (`false`); interval sync covers the gaps.
    case channelStateChanged(connected: Bool)
    /// A subscription episode was added to the download queue.
    case assetAdded(SubscriptionItem)
    /// A subscription episode was created but deferred (its feed is at its quota, no autodelete).
    case assetDeferred(SubscriptionItem)
    /// A subscription item was removed from the queue (retracted) or reset to make room.
    case subscriptionAssetDeleted(assetId: String, feedId: String, reason: AssetDeletionReason)
    case subscriptionStatusChanged(SubscriptionStatus)
    case subscriptionSyncFinished(SubscriptionSyncSummary)
    /// The backplane confirmed this many queued events (stored now or before); they left the queue.
    case logsSent(count: Int)
    /// The backplane refused these events for good (each result says why); they left the queue.
    /// The SDK checks events before queueing them, so this means a server with stricter rules.
    case logsRejected([EventResult])
    /// An asset joined the download queue.
    case downloadQueued(DownloadAsset)
    /// The engine began (or went on with) downloading an asset.
    case downloadStarted(assetId: String)
    /// Bytes arrived; at most once per percent or per second of each asset.
    case downloadProgress(assetId: String, bytes: Int64, expectedBytes: Int64?, fraction: Double?)
    case downloadCompleted(DownloadAsset)
    /// The backplane refused the asset's download: `rule` is at its limit (`counts` has every
    /// count). A permanent denial (`assetLifetime`) fails the asset; another is asked again at
    /// the next pass through the queue.
    case downloadDenied(assetId: String, rule: DownloadRule, counts: DownloadCounts?, permanent: Bool)
    /// A try failed; `willRetry` is false once the asset is `failed` (fatal, or its third pass).
    case downloadError(assetId: String, failure: DownloadFailure, willRetry: Bool)
    /// Something about a download the app may want to know that did not stop it.
    case downloadWarning(assetId: String, message: String)
    /// A rule stops the queue (storage, network, the device not download-enabled, …).
    case downloadsBlocked(DownloadBlock)
    /// The rule that stopped the queue no longer does.
    case downloadsUnblocked
    /// An asset left the queue or the device (`reason` says who asked).
    case downloadRemoved(assetId: String, reason: AssetDeletionReason)
    case downloadEngineStatusChanged(DownloadEngineStatus)
    /// A downloaded asset's window ended; the expiry sweep deleted its files.
    case assetExpired(assetId: String, reason: ExpiryReason)
    /// The device's clock was set since the last sync: assets with a window are not playable
    /// (`untrustedTime`) until the next sync.
    case trustedTimeLost(UntrustedReason)
    /// The playback server refused an asset's playlist, file or key: its rights are not `valid`.
    case playbackRefused(assetId: String, rights: AssetRights)

    /// A stable name, e.g. for logs and the harness's JSON lines.
    public var name: String {
        switch self {
        case .registered: "registered"
        case .deviceAlreadyRegistered: "deviceAlreadyRegistered"
        case .deviceLimitReached: "deviceLimitReached"
        case .invalidCredentials: "invalidCredentials"
        case .communicationsFailure: "communicationsFailure"
        case .syncCompleted: "syncCompleted"
        case .downloadEnabledChanged: "downloadEnabledChanged"
        case .settingsChanged: "settingsChanged"
        case .unregistered: "unregistered"
        case .remoteWipe: "remoteWipe"
        case .assetsDeleted: "assetsDeleted"
        case .startingRemoteKill: "startingRemoteKill"
        case .remoteKill: "remoteKill"
        case .channelStateChanged: "channelStateChanged"
        case .assetAdded: "assetAdded"
        case .assetDeferred: "assetDeferred"
        case .subscriptionAssetDeleted: "subscriptionAssetDeleted"
        case .subscriptionStatusChanged: "subscriptionStatusChanged"
        case .subscriptionSyncFinished: "subscriptionSyncFinished"
        case .logsSent: "logsSent"
        case .logsRejected: "logsRejected"
        case .downloadQueued: "downloadQueued"
        case .downloadStarted: "downloadStarted"
        case .downloadProgress: "downloadProgress"
        case .downloadCompleted: "downloadCompleted"
        case .downloadDenied: "downloadDenied"
        case .downloadError: "downloadError"
        case .downloadWarning: "downloadWarning"
        case .downloadsBlocked: "downloadsBlocked"
        case .downloadsUnblocked: "downloadsUnblocked"
        case .downloadRemoved: "downloadRemoved"
        case .downloadEngineStatusChanged: "downloadEngineStatusChanged"
        case .assetExpired: "assetExpired"
        case .trustedTimeLost: "trustedTimeLost"
        case .playbackRefused: "playbackRefused"
        }
    }
}

/// The outcome of one sync.
public struct SyncResult: Sendable, Equatable {
    public var device: Device
    public var settings: ApplicationSettings
    public var serverTime: Date
    /// When the sync completed, by the device's clock.
    public var syncedAt: Date
    /// Server time minus device time, in seconds.
    public var clockOffset: TimeInterval
}

/// Fans events out to every current subscriber. Each subscriber has its own bounded buffer, so a
/// slow one drops its oldest events rather than holding up the engine.
final class EventBroadcaster: Sendable {
    private let state = Mutex(State())

    private struct State {
        var continuations: [UUID: AsyncStream<SDKEvent>.Continuation] = [:]
        var finished = false
    }

    func subscribe() -> AsyncStream<SDKEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: SDKEvent.self, bufferingPolicy: .bufferingNewest(256))
        let id = UUID()
        let added = state.withLock { state -> Bool in
            guard !state.finished else { return false }
            state.continuations[id] = continuation
            return true
        }
        if added {
            continuation.onTermination = { [weak self] _ in
                self?.state.withLock { _ = $0.continuations.removeValue(forKey: id) }
            }
        } else {
            continuation.finish()
        }
        return stream
    }

    func emit(_ event: SDKEvent) {
        for continuation in state.withLock({ Array($0.continuations.values) }) {
            continuation.yield(event)
        }
    }

    func finish() {
        let continuations = state.withLock { state in
            state.finished = true
            defer { state.continuations = [:] }
            return Array(state.continuations.values)
        }
        continuations.forEach { $0.finish() }
    }
}
