import Foundation
import BackplaneWire

// The engine's public requests, each handed to the collaborator whose job it is.
extension BackplaneEngine {
    // MARK: sync and upload

    /// Syncs now and returns the result; joins the sync already under way instead of starting a
    /// second one.
    @discardableResult
    public func sync() async throws -> SyncResult {
        try await running().syncLoop.sync()
    }

    /// Asks the background loop to sync as soon as it can (e.g. on a push "sync now").
    public func syncNow() {
        components?.syncLoop.wakeUp()
    }

    /// Uploads the queued events now, batch after batch until the queue is empty, and returns
    /// how many the backplane confirmed. Joins an upload already under way.
    @discardableResult
    public func uploadEvents() async throws -> Int {
        try await running().uploader.upload(reportingErrors: true)
    }

    /// Whether the wake-up channel is open now.
    public var isChannelConnected: Bool {
        components?.channel.isConnected ?? false
    }

    // MARK: the device's own requests

    /// Asks the backplane to turn download on or off for this device. Turning it on while the
    /// user is at the device limit throws a `.server` error with code `device_limit_reached`.
    @discardableResult
    public func updateDownloadEnabled(_ enabled: Bool) async throws -> Device {
        try await deviceRequest { api, credentials in try await api.setDownloadEnabled(enabled, as: credentials) }
    }

    /// Turns download off for another device of the user (one from `userDevices()`): frees a
    /// place under the device limit from the device in hand, e.g. for a tablet left in a drawer,
    /// so that this device can then enable itself. Turning another device on is refused (a
    /// `.server` error, `forbidden`); a device of another user is `not_found`.
    @discardableResult
    public func disableDownload(onDevice deviceId: String) async throws -> Device {
        let session = try running().session
        return try await reporting {
            try await session.request { api, credentials in
                try await api.setSiblingDownloadEnabled(false, deviceId: deviceId, as: credentials).device
            }
        }
    }

    @discardableResult
    public func setNickname(_ nickname: String?) async throws -> Device {
        try await updateProfile(DeviceProfileUpdate(nickname: nickname ?? ""))
    }

    @discardableResult
    public func setExternalDeviceId(_ externalDeviceId: String?) async throws -> Device {
        try await updateProfile(DeviceProfileUpdate(externalDeviceId: externalDeviceId ?? ""))
    }

    /// Hands the backplane the platform's push token and the service that delivers to it (nil
    /// clears both): the APNs device token in hex on Apple platforms, the FCM registration token
    /// on Android. The backplane then pushes this device when a command waits for it and its
    /// channel is not open (the app is not running), and the app calls `handlePush(_:)`.
    @discardableResult
    public func updatePushToken(_ pushToken: String?, provider: PushProvider) async throws -> Device {
        try await updateProfile(DeviceProfileUpdate(pushToken: pushToken ?? "", pushProvider: pushToken == nil ? nil : provider))
    }

    /// Hands the backplane the platform's push token (nil clears it); the backplane takes the
    /// provider from the platform. `updatePushToken(_:provider:)` names it.
    @discardableResult
    public func setPushToken(_ pushToken: String?) async throws -> Device {
        try await updateProfile(DeviceProfileUpdate(pushToken: pushToken ?? ""))
    }

    /// Call with every push the app receives: `userInfo` on Apple platforms, the data message
    /// (`RemoteMessage.data`) on Android. A push from the backplane (it carries `backplane: sync`)
    /// makes the engine sync as soon as it can, and the answer is true; any other payload is the
    /// app's and left alone (false). The push says nothing else: the commands come with the sync.
    @discardableResult
    public nonisolated func handlePush(_ payload: [AnyHashable: Any]) -> Bool {
        guard payload[PushWakeUpPayload.key] as? String == PushWakeUpPayload.value else { return false }
        Task { await self.syncNow() }
        return true
    }

    /// The user's registered devices, with how many may download and the limit.
    public func userDevices() async throws -> UserDevicesResponse {
        let session = try running().session
        return try await reporting {
            try await session.request { api, credentials in try await api.userDevices(as: credentials) }
        }
    }

    /// Unregisters this device: it stops downloading, leaves the user's device list and stops syncing.
    public func unregister() async throws {
        let session = try running().session
        let credentials = try await session.credentials()
        try await reporting {
            _ = try await session.api.unregister(as: credentials)
        }
        await becomeUnregistered()
    }

    private func updateProfile(_ update: DeviceProfileUpdate) async throws -> Device {
        try await deviceRequest { api, credentials in try await api.updateProfile(update, as: credentials) }
    }

    /// A request answered with the device's record, which is stored.
    private func deviceRequest(_ call: @Sendable (BackplaneAPI, DeviceCredentials) async throws -> DeviceResponse) async throws -> Device {
        let parts = try running()
        return try await reporting {
            let response = try await parts.session.request(call)
            try parts.snapshot.record(device: response.device, settings: response.settings, serverTime: response.serverTime, syncedAt: nil)
            return response.device
        }
    }

    // MARK: subscriptions (through `subscriptions`)

    func subscribe(feedId: String, request: SubscribeRequest) async throws -> Subscription {
        let subscriptions = try running().subscriptions
        return try await reporting { try await subscriptions.subscribe(feedId: feedId, request: request) }
    }

    func unsubscribe(feedId: String) async throws {
        let subscriptions = try running().subscriptions
        try await reporting { try await subscriptions.unsubscribe(feedId: feedId) }
    }

    func listSubscriptions() async throws -> [Subscription] {
        try await running().subscriptions.list()
    }

    func episodes(since date: Date, onlySubscribed: Bool) async throws -> [Episode] {
        try await running().subscriptions.episodes(since: date, onlySubscribed: onlySubscribed)
    }

    func subscriptionItems(feedId: String?) throws -> [SubscriptionItem] {
        try loadComponents().database.access { try $0.items(feedId: feedId) }
    }

    func includeItem(assetId: String, inTrackingFeed feedId: String) throws -> SubscriptionItem {
        guard !feedId.isEmpty, feedId.utf8.count <= WireLimits.maxIdentifierLength else {
            throw BackplaneClientError(kind: .invalidInput, message: "A feed id is 1 to \(WireLimits.maxIdentifierLength) bytes.")
        }
        switch try loadComponents().database.access({ try $0.trackItem(assetId: assetId, feedId: feedId) }) {
        case .tracked(let item):
            return item
        case .unknownAsset:
            throw BackplaneClientError(kind: .invalidInput, message: "Asset \(assetId) is neither queued nor downloaded.")
        case .trackedBy(let other):
            throw BackplaneClientError(kind: .invalidInput, message: "Asset \(assetId) is tracked in feed \(other) already.")
        }
    }

    // MARK: downloaded content

    /// Puts a file the app already has in place as the downloaded content of `assetId` (copied
    /// into the SDK's content directory) and records it, as if the download engine had fetched it.
    @discardableResult
    public func addDownloadedAsset(assetId: String, copying file: URL) throws -> LocalAsset {
        let content = try loadComponents().content
        do {
            return try content.add(assetId: assetId, copying: file)
        } catch {
            throw BackplaneClientError(kind: .localStorage, message: "Could not add \(file.path) as asset \(assetId).", underlying: error)
        }
    }

    /// The downloaded assets the SDK holds.
    public func downloadedAssets() throws -> [LocalAsset] {
        try loadComponents().database.access { try $0.assets() }
    }

    /// Where an asset's file is.
    public func fileURL(of asset: LocalAsset) -> URL? {
        components?.content.url(of: asset)
    }
}
