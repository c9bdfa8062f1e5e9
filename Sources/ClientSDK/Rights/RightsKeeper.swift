import Foundation
import Synchronization
import BackplaneWire

/// The rights of downloaded assets: judged on the trusted clock, started at play (expiry after
/// play), and enforced by the expiry sweep, which deletes what expired as soon as it can (at
/// start, after each sync, at the next instant an asset's window ends, and at least every
/// `sweepInterval`) and renews licenses before they end.
final class RightsKeeper: Sendable {
    let database: SDKDatabase
    let content: ContentStore
    let clock: TrustedClock
    let snapshot: DeviceSnapshot
    let options: RightsOptions
    let events: EngineEvents
    let lifecycle: EngineLifecycle
    /// Asks the backplane again for a held grant: the answer carries a fresh entitlement.
    let askBackplane: @Sendable (DownloadPermissionRequest) async throws -> DownloadPermissionResponse
    /// Asks the engine for a sync now (time became untrusted).
    let requestSync: @Sendable () -> Void
    /// Wakes the sweep (after a sync).
    private let wake = WakeSignal()
    private let loop = Mutex<Task<Void, Never>?>(nil)
    private let lastSweep = Mutex<Task<Date?, Never>?>(nil)
    /// When each asset was last played, to the playback server's eyes: a play start recorded
    /// (by the app or the server), or a file of it served. In this process's monotonic time.
    private let playActivity = Mutex<[String: ContinuousClock.Instant]>([:])
    /// A pause longer than this between an asset's requests ends its play session: the next
    /// request of a playlist (or a flat asset's file) starts another play.
    static let playSessionGap: Duration = .seconds(60)
    /// `valid` answers at the playback server's door, by asset (`playbackRights`).
    private let doorAnswers = Mutex<[String: (until: Date?, downloading: Bool, at: ContinuousClock.Instant)]>([:])
    static let doorAnswerLifetime: Duration = .seconds(1)

    init(
        database: SDKDatabase, content: ContentStore, clock: TrustedClock, snapshot: DeviceSnapshot, options: RightsOptions,
        events: EngineEvents, lifecycle: EngineLifecycle,
        askBackplane: @escaping @Sendable (DownloadPermissionRequest) async throws -> DownloadPermissionResponse,
        requestSync: @escaping @Sendable () -> Void = {}
    ) {
        self.askBackplane = askBackplane
        self.requestSync = requestSync
        self.database = database
        self.content = content
        self.clock = clock
        self.snapshot = snapshot
        self.options = options
        self.events = events
        self.lifecycle = lifecycle
    }

    // MARK: rights

    /// The window an asset is played in. Granted: the backplane's window (the application's
    /// settings, the asset's episode, an admin's policy), which the asset's own availability (the
    /// app's, or its episode's as the CMS last changed it) can only shorten. Not granted: the
    /// application's current settings under the asset's own availability. The offline period
    /// is always the current setting: it is about the device, not the asset.
    func window(of stored: StoredRights) -> DownloadWindow {
        let settings = snapshot.current?.settings ?? .defaults
        guard var granted = stored.grantedWindow else { return DownloadWindow(settings: settings, asset: stored.request?.availability) }
        granted.offlineViewingPeriodSeconds = settings.offlineViewingPeriodSeconds
        guard let own = stored.request?.availability else { return granted }
        return Self.tightened(granted, by: own)
    }

    /// `window` with each of `own`'s values that ends it sooner (or publishes it later).
    static func tightened(_ window: DownloadWindow, by own: AssetAvailability) -> DownloadWindow {
        /// Durations: -1 is never, so any other value is tighter.
        func shorter(_ duration: Int, _ other: Int?) -> Int {
            guard let other, other >= 0 else { return duration }
            return duration < 0 ? other : min(duration, other)
        }
        var result = window
        result.publishDate = [window.publishDate, own.publishDate].compactMap { $0 }.max()
        result.expiryDate = [window.expiryDate, own.expiryDate].compactMap { $0 }.min()
        result.expiryAfterDownloadSeconds = shorter(window.expiryAfterDownloadSeconds, own.expiryAfterDownloadSeconds)
        result.expiryAfterPlaySeconds = shorter(window.expiryAfterPlaySeconds, own.expiryAfterPlaySeconds)
        return result
    }

    func rights(of stored: StoredRights, at now: TrustedTime) -> AssetRights {
        RightsFacts(window: window(of: stored), downloadedAt: stored.downloadedAt, firstPlayedAt: stored.firstPlayedAt)
            .rights(at: now, lastSync: clock.lastSync, license: stored.license)
    }

    func rights(assetId: String) throws -> AssetRights {
        guard let stored = try database.storedRights(assetId: assetId).first else { return .noRights }
        return rights(of: stored, at: now())
    }

    /// The rights the playback server keeps at its door: a completed asset's, or, for the asset
    /// the engine is downloading now (`downloading`), the rights it would have if it completed
    /// now (its expiry after download has not started), with its granted window and license.
    /// `noRights` for any other asset.
    ///
    /// The door asks on every playlist, key and flat-file request of a player: a `valid` answer
    /// is kept for `doorAnswerLifetime`, never past its end on the trusted clock and only while
    /// time is trusted, so that a player's reads do not each wait for the database. A play start
    /// and a sync (which may change the window) forget what was kept; a read under way then may
    /// still keep its answer, for at most that second.
    func playbackRights(assetId: String, downloading: Bool) throws -> AssetRights {
        let now = now()
        if let date = now.date, let kept = doorAnswers.withLock({ $0[assetId] }), kept.downloading == downloading,
            ContinuousClock.now - kept.at < Self.doorAnswerLifetime, kept.until.map({ date < $0 }) ?? true {
            return .valid(until: kept.until)
        }
        let rights = try readPlaybackRights(assetId: assetId, downloading: downloading, at: now)
        doorAnswers.withLock { answers in
            if answers.count >= 256 { answers.removeAll() }
            if case .valid(let until) = rights { answers[assetId] = (until, downloading, .now) } else { answers[assetId] = nil }
        }
        return rights
    }

    private func readPlaybackRights(assetId: String, downloading: Bool, at now: TrustedTime) throws -> AssetRights {
        if let stored = try database.storedRights(assetId: assetId).first { return rights(of: stored, at: now) }
        guard downloading, let queued = try database.queuedDownload(assetId: assetId), !queued.failed else { return .noRights }
        let stored = StoredRights(
            assetId: assetId, request: queued.request, grantId: queued.grantId, grantedWindow: queued.window, license: queued.license,
            downloadedAt: now.date ?? options.deviceClock.wallNow, firstPlayedAt: queued.firstPlayedAt)
        return rights(of: stored, at: now)
    }

    /// Every completed asset's rights, oldest first.
    func allRights() throws -> [(StoredRights, AssetRights)] {
        let now = now()
        return try database.storedRights().map { ($0, rights(of: $0, at: now)) }
    }

    /// Trusted time; tells the app, and syncs to trust it again, when it finds the device's
    /// clock changed.
    func now() -> TrustedTime {
        let now = clock.now()
        if case .untrusted(.deviceClockChanged) = now, clock.noteLossReported() {
            events.tellApp(.trustedTimeLost(.deviceClockChanged))
            requestSync()
        }
        return now
    }

    /// A play of the asset starts: allowed only while its rights are valid. The first play
    /// starts its expiry after play. Logs `playStart`. Returns the rights as they are then.
    func recordPlayStart(assetId: String) throws -> AssetRights {
        try recordPlayStart(assetId: assetId) { try rights(assetId: assetId) }
    }

    /// `recordPlayStart` with the rights read by `rightsNow`.
    private func recordPlayStart(assetId: String, rightsNow: () throws -> AssetRights) throws -> AssetRights {
        let rights = try rightsNow()
        guard rights.isPlayable else { return rights }
        // An asset without a window may be played without trusted time: its first play is then
        // the device's clock, which nothing reads.
        _ = try database.recordFirstPlay(assetId: assetId, at: now().date ?? options.deviceClock.wallNow)
        doorAnswers.withLock { $0[assetId] = nil }
        playActivity.withLock { $0[assetId] = .now }
        clock.checkpoint()
        events.log(.playStart(assetId: assetId))
        return try rightsNow()
    }

    /// The playback server served a file of `assetId` (`entry`: a playlist, or a flat asset's
    /// file; `downloading`: of the asset the engine is downloading now). The first entry request
    /// of a play session counts as the play start, as `recordPlayStart` would record it, unless
    /// the app recorded one within the session.
    func notePlaybackRequest(assetId: String, entry: Bool, downloading: Bool) throws {
        let now = ContinuousClock.now
        let startsPlay = playActivity.withLock { activity in
            let inSession = activity[assetId].map { now - $0 < Self.playSessionGap } ?? false
            activity[assetId] = now
            return entry && !inSession
        }
        if startsPlay { _ = try recordPlayStart(assetId: assetId) { try playbackRights(assetId: assetId, downloading: downloading) } }
    }

    /// A play stopped after `watched` seconds (if the app knows). Logs `playStop`.
    func recordPlayStop(assetId: String, watched: TimeInterval?) throws {
        guard try database.storedRights(assetId: assetId).first != nil else {
            throw BackplaneClientError(kind: .invalidInput, message: "Asset \(assetId) is not on the device.")
        }
        let seconds = watched.flatMap { $0.isFinite && $0 >= 0 ? $0 : nil }
        events.log(.playStop(assetId: assetId, durationSeconds: seconds))
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

    /// Waits for the sweeps already queued: after the engine shut down they do nothing
    /// (`sweepOnce`), and one that was running finishes before `shutdown` returns, so no sweep of
    /// this engine deletes or records anything under a newer engine on the same data.
    func finishInFlight() async {
        _ = await lastSweep.withLock { $0 }?.value
    }

    /// Sweeps soon (after a sync: the time is trusted again, the settings may have changed).
    func sweepSoon() {
        doorAnswers.withLock { $0.removeAll() }
        wake.signal()
    }

    private func run() async {
        while lifecycle.isRunning, !Task.isCancelled {
            let next = await sweep()
            var delay = options.sweepInterval
            if let next, let now = clock.now().date {
                // A little after the instant, so that the window has ended by then.
                let until = max(next.timeIntervalSince(now), 0) + 0.01
                delay = min(delay, .milliseconds(Int64(nonNegative: min(until, 86_400) * 1000) ?? 86_400_000))
            }
            _ = await wake.wait(upTo: delay)
        }
    }

    /// Deletes the completed assets whose window ended and renews licenses that end soon;
    /// returns the next instant the sweep has something to do. Sweeps run one after another
    /// (the timer's, after a sync, the app's), so no license is renewed twice.
    @discardableResult
    func sweep() async -> Date? {
        let task = lastSweep.withLock { last in
            let previous = last
            let next = Task { [weak self] () -> Date? in
                _ = await previous?.value
                return await self?.sweepOnce()
            }
            last = next
            return next
        }
        return await task.value
    }

    private func sweepOnce() async -> Date? {
        // A sweep queued behind a slow one may start after the engine shut down: a shut-down
        // engine must not delete what a newer engine on the same data is judging.
        guard lifecycle.current != .shutDown else { return nil }
        clock.checkpoint()
        guard let all = try? allRights() else { return nil }
        // Deleted first, with no await between the judgement and the deletion.
        let expired = all.compactMap { stored, rights -> (String, ExpiryReason)? in
            guard case .expired(let reason) = rights else { return nil }
            return (stored.assetId, reason)
        }
        // On a new process's estimate of the time, an expired window only locks its asset: a
        // clock set forward while the app was not running must not delete downloads.
        if !expired.isEmpty, clock.isConfirmed {
            // Each leaves as every asset does (`removeDownloaded`: deleted with reason internal),
            // and is said to have expired, and why.
            let deleted = Set((try? content.removeDownloaded(expired.map(\.0), reason: .internal)) ?? [])
            for (assetId, reason) in expired where deleted.contains(assetId) {
                events.record(.assetExpired(assetId: assetId), tellingApp: .assetExpired(assetId: assetId, reason: reason))
            }
        }
        var next: Date?
        for (stored, rights) in all {
            switch rights {
            case .valid(let until):
                if let until { next = min(next ?? until, until) }
                if let renewAt = await renewLicense(of: stored) { next = min(next ?? renewAt, renewAt) }
            default:
                break
            }
        }
        return next
    }

    /// Renews the asset's license when it ends within the renewal lead; returns when to look
    /// again (the start of the lead of the license's end), or nil.
    private func renewLicense(of stored: StoredRights) async -> Date? {
        guard case .acquired(let until?) = stored.license, let request = stored.request, let now = clock.now().date else { return nil }
        let renewAt = until.addingTimeInterval(-options.licenseRenewalLead)
        guard renewAt <= now else { return renewAt }
        var entitlement: String?
        if let grantId = stored.grantId, lifecycle.isRunning {
            entitlement = await LicenseRequest.freshEntitlement(assetId: stored.assetId, grantId: grantId, ask: askBackplane)
        }
        let asking = LicenseRequest(
            assetId: stored.assetId, url: request.url, kind: request.kind, entitlement: entitlement, window: window(of: stored),
            contentProtection: DownloadPlan.kept(in: content.directory(for: stored.assetId))?.contentProtection ?? [],
            keyIds: DownloadPlan.kept(in: content.directory(for: stored.assetId))?.keyIds ?? [], grantId: stored.grantId)
        // Never sooner than a sweep interval from now: a license shorter than the lead, or a
        // provider that hands back the same end, must not be renewed in a loop.
        let earliest = now.addingTimeInterval(options.sweepInterval.seconds)
        do {
            let renewed = try await options.licenseProvider.renewLicense(for: asking)
            try? database.recordLicense(.acquired(until: renewed), assetId: stored.assetId)
            return renewed.map { max($0.addingTimeInterval(-options.licenseRenewalLead), earliest) }
        } catch {
            // The old license stands until it ends; asked again a sweep interval later.
            return earliest
        }
    }
}
