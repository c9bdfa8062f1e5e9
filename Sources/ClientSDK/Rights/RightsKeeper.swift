import Foundation
import BackplaneWire

/// The rights of downloaded assets: judged on the trusted clock, started at play (expiry after
/// play), and enforced by the expiry sweep, which deletes what expired as soon as it can (at
/// start, after each sync, at the next instant an asset's window ends, and at least every
/// `sweepInterval`) and renews licenses before they end.
final class RightsKeeper: Sendable {
    let local: LocalStore
    let content: ContentStore
    let clock: TrustedClock
    let snapshot: DeviceSnapshot
    let options: RightsOptions
    let eventLogger: EventLogger
    let broadcaster: EventBroadcaster
    let lifecycle: EngineLifecycle
    /// Wakes the download engine: an expired asset frees room and a place under the asset limits.
    let downloadSignal: WakeSignal
    /// Wakes the sweep (after a sync).
    private let wake = WakeSignal()
    private let loop = Mutex<Task<Void, Never>?>(nil)

    init(
        local: LocalStore, content: ContentStore, clock: TrustedClock, snapshot: DeviceSnapshot, options: RightsOptions,
        eventLogger: EventLogger, broadcaster: EventBroadcaster, lifecycle: EngineLifecycle, downloadSignal: WakeSignal
    ) {
        self.local = local
        self.content = content
        self.clock = clock
        self.snapshot = snapshot
        self.options = options
        self.eventLogger = eventLogger
        self.broadcaster = broadcaster
        self.lifecycle = lifecycle
        self.downloadSignal = downloadSignal
    }

    // MARK: rights

    /// The window an asset is played in: the application's current settings, under the window
    /// the backplane granted (if it was asked), under the asset's own availability (the app's,
    /// or its episode's as the CMS last changed it). The offline period is always the
    /// application's current one: it is about the device, not the asset.
    func window(of stored: StoredRights) -> DownloadWindow {
        let settings = snapshot.current?.settings ?? .defaults
        let granted = stored.grantedWindow.map {
            AssetAvailability(
                publishDate: $0.publishDate, expiryDate: $0.expiryDate, expiryAfterDownloadSeconds: $0.expiryAfterDownloadSeconds,
                expiryAfterPlaySeconds: $0.expiryAfterPlaySeconds)
        }
        let own = stored.request?.availability ?? AssetAvailability()
        return DownloadWindow(settings: settings, asset: own.over(granted))
    }

    func rights(of stored: StoredRights, at now: TrustedTime) -> AssetRights {
        RightsFacts(window: window(of: stored), downloadedAt: stored.downloadedAt, firstPlayedAt: stored.firstPlayedAt)
            .rights(at: now, lastSync: clock.lastSync)
    }

    func rights(assetId: String) throws -> AssetRights {
        guard let stored = try local.storedRights(assetId: assetId).first else { return .noRights }
        return rights(of: stored, at: now())
    }

    /// Every completed asset's rights, oldest first.
    func allRights() throws -> [(StoredRights, AssetRights)] {
        let now = now()
        return try local.storedRights().map { ($0, rights(of: $0, at: now)) }
    }

    /// Trusted time; tells the app when it finds the device's clock changed.
    func now() -> TrustedTime {
        let now = clock.now()
        if case .untrusted(.deviceClockChanged) = now, clock.noteLossReported() {
            broadcaster.emit(.trustedTimeLost(.deviceClockChanged))
        }
        return now
    }

    /// A play of the asset starts: allowed only while its rights are valid. The first play
    /// starts its expiry after play. Logs `playStart`. Returns the rights as they are then.
    func recordPlayStart(assetId: String) throws -> AssetRights {
        let rights = try rights(assetId: assetId)
        guard rights.isPlayable else { return rights }
        // An asset without a window may be played without trusted time: its first play is then
        // the device's clock, which nothing reads.
        _ = try local.recordFirstPlay(assetId: assetId, at: now().date ?? options.deviceClock.wallNow)
        clock.checkpoint()
        _ = try? eventLogger.log(.playStart(assetId: assetId))
        return try self.rights(assetId: assetId)
    }

    /// A play stopped after `watched` seconds (if the app knows). Logs `playStop`.
    func recordPlayStop(assetId: String, watched: TimeInterval?) throws {
        guard try local.storedRights(assetId: assetId).first != nil else {
            throw BackplaneClientError(kind: .invalidInput, message: "Asset \(assetId) is not on the device.")
        }
        let seconds = watched.flatMap { $0.isFinite && $0 >= 0 ? $0 : nil }
        _ = try? eventLogger.log(.playStop(assetId: assetId, durationSeconds: seconds))
    }

    // MARK: the sweep

    func start() {
        loop.withLock { loop in
            guard loop == nil else { return }
            loop = Task { [weak self] in await self?.run() }
        }
    }

    func stop() {
        loop.withLock { loop in
            loop?.cancel()
            loop = nil
        }
    }

    /// Sweeps soon (after a sync: the time is trusted again, the settings may have changed).
    func sweepSoon() {
        wake.signal()
    }

    private func run() async {
        while lifecycle.isRunning, !Task.isCancelled {
            let next = await sweep()
            var delay = options.sweepInterval
            if let next, let now = clock.now().date {
                // A little after the instant, so that the window has ended by then.
                let until = max(next.timeIntervalSince(now), 0) + 0.01
                delay = min(delay, .milliseconds(Int64(min(until, 86_400) * 1000)))
            }
            _ = await wake.wait(upTo: delay)
        }
    }

    /// Deletes the completed assets whose window ended and renews licenses that end soon;
    /// returns the deleted ids and the next instant the sweep has something to do.
    @discardableResult
    func sweep() async -> Date? {
        clock.checkpoint()
        guard let all = try? allRights() else { return nil }
        var next: Date?
        var expired: [(String, ExpiryReason)] = []
        for (stored, rights) in all {
            switch rights {
            case .expired(let reason): expired.append((stored.assetId, reason))
            case .valid(let until?): next = min(next ?? until, until)
            default: break
            }
            if let renewAt = await renewLicense(of: stored) { next = min(next ?? renewAt, renewAt) }
        }
        guard !expired.isEmpty else { return next }
        let deleted = Set((try? content.delete(expired.map(\.0))) ?? [])
        for (assetId, reason) in expired where deleted.contains(assetId) {
            _ = try? eventLogger.log(.assetExpired(assetId: assetId))
            broadcaster.emit(.assetExpired(assetId: assetId, reason: reason))
            await options.licenseProvider.releaseLicense(assetId: assetId)
        }
        downloadSignal.signal()
        return next
    }

    /// Renews the asset's license when it ends within the renewal lead; returns when to look
    /// again (the start of the lead of the license's end), or nil.
    private func renewLicense(of stored: StoredRights) async -> Date? {
        guard case .acquired(let until?) = stored.license, let request = stored.request, let now = clock.now().date else { return nil }
        let renewAt = until.addingTimeInterval(-options.licenseRenewalLead)
        guard renewAt <= now else { return renewAt }
        let asking = LicenseRequest(
            assetId: stored.assetId, url: request.url, kind: request.kind, entitlement: nil, window: window(of: stored))
        do {
            let renewed = try await options.licenseProvider.renewLicense(for: asking)
            try? local.recordLicense(.acquired(until: renewed), assetId: stored.assetId)
            return renewed.map { $0.addingTimeInterval(-options.licenseRenewalLead) }
        } catch {
            // The old license stands until it ends; asked again at the next sweep.
            return nil
        }
    }
}
