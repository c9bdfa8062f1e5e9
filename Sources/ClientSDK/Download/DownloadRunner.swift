import AsyncHTTPClient
import Foundation
import Synchronization
import BackplaneWire

/// The download engine's loop: while the SDK engine runs, it downloads the queue in order, one
/// asset at a time, under the rules (the app's switch, the backplane's download-enabled flag,
/// the network, storage, the asset limits), and applies the rule of threes across passes.
///
/// Rule of threes: a file is tried three times in a row (`AssetDownloader`); when it still
/// fails, the asset's error count rises and the loop moves on to the next asset. When only
/// errored assets are left, the next pass starts after `retryPassDelay`. An asset whose third
/// pass fails, or whose failure is fatal, is `failed` until the app clears its retries.
actor DownloadRunner {
    let database: SDKDatabase
    let content: ContentStore
    nonisolated let options: DownloadOptions
    let snapshot: DeviceSnapshot
    let lifecycle: EngineLifecycle
    let events: EngineEvents
    let downloader: AssetDownloader
    /// Works out what an asset will take before its download starts.
    let estimator: SizeEstimator
    /// What must hold for the queue to run.
    nonisolated let requirements: DownloadRequirements
    /// Wakes the loop: queue changes, the switch, the backplane's answers, the network, freed space.
    nonisolated let signal: WakeSignal
    /// Asks the backplane for download permissions.
    let permission: DownloadPermission
    /// Trusted time: when a download completes, its expiry after download starts.
    let clock: TrustedClock
    let licenses: any LicenseProvider
    private nonisolated let tasks = Mutex(Tasks())
    /// The asset being downloaded, from its permission until its record is an asset's, with a
    /// number that tells one download of it from the next.
    private nonisolated let downloadingNow = Mutex<(current: (assetId: String, session: Int, plan: DownloadPlan)?, count: Int)>((nil, 0))
    /// The system run files are written in without flushes (`noteUnflushed`); nil when the
    /// engine flushes them.
    nonisolated let unflushedBoot: String?

    private struct Tasks {
        var loop: Task<Void, Never>?
        /// The loop `stop()` cancelled, until it has ended (it flushes the asset it stopped).
        var stoppedLoop: Task<Void, Never>?
        /// Follows the app's network and power monitors.
        var deviceMonitors: Task<Void, Never>?
        var current: (assetId: String, task: Task<LocalAsset, any Error>)?
        /// The current asset's progress, ahead of what is stored.
        var progress: ProgressReporter?
    }

    /// What the loop knows beyond the database, changed through its named transitions.
    var state = DownloadLoopState()
    var status: DownloadEngineStatus { state.status }

    /// Passes through the queue with errors before an asset is `failed`.
    static let maxErrorPasses = 3

    init(
        database: SDKDatabase, content: ContentStore, options: DownloadOptions, snapshot: DeviceSnapshot, lifecycle: EngineLifecycle,
        events: EngineEvents, signal: WakeSignal, clock: TrustedClock, licenses: any LicenseProvider, keyVault: KeyVault? = nil,
        httpClient: HTTPClient = DownloadClients.shared,
        requestSync: @escaping @Sendable () -> Void = {},
        askBackplane: @escaping @Sendable (DownloadPermissionRequest) async throws -> DownloadPermissionResponse
    ) {
        self.clock = clock
        self.licenses = licenses
        self.permission = DownloadPermission(
            database: database, options: options, snapshot: snapshot, events: events,
            askBackplane: askBackplane, requestSync: requestSync)
        self.database = database
        self.content = content
        self.options = options
        self.snapshot = snapshot
        self.lifecycle = lifecycle
        self.events = events
        self.requirements = DownloadRequirements(database: database, content: content, options: options, snapshot: snapshot)
        // Files go unflushed only where a restart of the system can be told at the next start.
        let boot = options.flushesFiles ? nil : options.bootSession()
        self.unflushedBoot = boot
        self.estimator = SizeEstimator(client: httpClient)
        let fetcher = FileFetcher(
            client: httpClient, flushes: boot == nil, minimumRate: options.minimumTransferRate,
            bandwidth: BandwidthLimit(bytesPerSecond: options.maxBytesPerSecond, now: options.bandwidthClock.now, sleep: options.bandwidthClock.sleep))
        self.downloader = AssetDownloader(
            fetcher: fetcher,
            concurrency: AdaptiveConcurrency.Settings(
                initial: options.parallelFiles, connectionsPerHost: options.maxConnectionsPerHost, streamsPerHost: options.maxStreamsPerHost,
                adapts: options.adaptsConcurrency),
            planners: DownloadPlanners(fetcher: fetcher, playlistLimits: options.playlistLimits, retry: FetchRetry(sleep: options.waitBeforeRetry)),
            refreshesURLs: options.urlRefresher != nil, keyVault: keyVault, cmcd: options.cmcd)
        self.signal = signal
    }

    // MARK: lifecycle

    nonisolated func start() {
        tasks.withLock { tasks in
            guard tasks.loop == nil else { return }
            tasks.loop = Task { [previous = tasks.stoppedLoop] in await self.run(after: previous) }
            tasks.deviceMonitors = Task { [weak self] in
                guard let network = self?.options.network.changes(), let power = self?.options.power.changes() else { return }
                await withDiscardingTaskGroup { group in
                    group.addTask {
                        for await _ in network {
                            guard let self else { return }
                            self.deviceChanged()
                        }
                    }
                    group.addTask {
                        for await _ in power {
                            guard let self else { return }
                            self.deviceChanged()
                        }
                    }
                }
            }
        }
    }

    /// The app reported a change of the network or the power. A network downloads may not use,
    /// or a battery run low, stops the file under way, not only the next.
    private nonisolated func deviceChanged() {
        if requirements.deviceBlock() != nil { tasks.withLock { $0.current?.task.cancel() } }
        signal.signal()
    }

    /// Stops the loop and the asset download under way (its partial files stay for later).
    nonisolated func stop() {
        tasks.withLock { tasks in
            tasks.loop?.cancel()
            tasks.deviceMonitors?.cancel()
            tasks.current?.task.cancel()
            if let loop = tasks.loop { tasks.stoppedLoop = loop }
            tasks.loop = nil
            tasks.deviceMonitors = nil
        }
    }

    /// Waits for the asset download under way to end after `stop()`, and the loop with it, for
    /// at most `limit` each: a fetch that does not notice its cancellation (an origin that
    /// stopped sending) must not hold the app's shutdown. Its partial files stay, and the next
    /// start resumes them.
    func finishInFlight(within limit: Duration = .seconds(5)) async {
        let deadline = ContinuousClock.now + limit
        if let current = tasks.withLock({ $0.current?.task }) {
            _ = await current.waitForCompletion(upTo: limit)
        }
        if let loop = tasks.withLock({ $0.stoppedLoop }) {
            _ = await loop.waitForCompletion(upTo: max(deadline - ContinuousClock.now, .zero))
            tasks.withLock { if $0.stoppedLoop == loop { $0.stoppedLoop = nil } }
        }
        setStatus(.stopped)
    }

    // MARK: playing while downloading

    /// While `assetId` is the asset the engine is downloading, the number of this download of
    /// it (its plan does not change until the number does); nil for any other asset.
    nonisolated func downloadSession(of assetId: String) -> Int? {
        downloadingNow.withLock { $0.current.flatMap { $0.assetId == assetId ? $0.session : nil } }
    }

    /// The plan of the asset the engine is downloading now, once it is made; nil for any other
    /// asset. The playback server plays it from this while it downloads.
    nonisolated func planInProgress(assetId: String) -> DownloadPlan? {
        downloadingNow.withLock { $0.current.flatMap { $0.assetId == assetId ? $0.plan : nil } }
    }

    // MARK: the loop

    /// `previous`: the loop stopped before this one was made, if it may still be running. (Not
    /// read from `tasks` here: a loop stopped before it began would find itself there.)
    private func run(after previous: Task<Void, Never>?) async {
        // A loop stopped without waiting for it (the engine stopped on a permanent failure or
        // on being unregistered, then started again) writes until its fetch ends: never two.
        if let previous {
            await previous.value
            tasks.withLock { if $0.stoppedLoop == previous { $0.stoppedLoop = nil } }
        }
        guard !Task.isCancelled else { return }
        await settleUnflushed()
        while lifecycle.isRunning, !Task.isCancelled {
            // Ids only: the one chosen is the only row decoded.
            let runnable = (try? database.runnableDownloadIds()) ?? []
            guard let next = state.next(among: runnable).flatMap({ try? database.queuedDownload(assetId: $0) })
            else {
                setBlock(nil)
                if runnable.isEmpty {
                    state.passEnded()
                    setStatus(.idle)
                    _ = await signal.wait(upTo: nil)
                } else {
                    setStatus(.waitingToRetry)
                    if await signal.wait(upTo: options.retryPassDelay) == .timedOut { state.passEnded() }
                }
                continue
            }
            if let reason = currentBlock() {
                setBlock(reason)
                setStatus(.blocked(reason))
                _ = await signal.wait(upTo: reason == .storage ? options.storageRecheck : nil)
                continue
            }
            setBlock(nil)
            await download(next)
        }
    }

    /// The rule that keeps the queue from running now, if any. Once the room grew past what it
    /// was when the head of the queue ran out of it, the head is tried again.
    func currentBlock() -> DownloadBlock? {
        let block = requirements.block(roomWhenStorageRanOut: state.roomWhenStorageRanOut)
        if block == nil { state.queueChanged() }
        return block
    }

    private func download(_ queued: QueuedDownload) async {
        let assetId = queued.assetId
        var queued = queued
        if await leftExpired(queued) { return }
        // Its plan, made (or read back) once and handed on by value; then its size: an asset
        // that cannot fit is never started.
        guard var plan = await plan(for: queued), let current = stillWanted(assetId) else { return }
        // The request the plan was made from: a new URL that came since needs its own.
        var plannedFor = queued.request
        queued = current
        guard let sized = await sizedToFit(queued, plan: plan) else { return }
        queued = sized
        var grant: DownloadGrant?
        if queued.grantId == nil, permission.isNeeded() {
            guard let granted = await permission(for: queued) else { return }
            grant = granted
            // The actor ran other calls while the backplane answered: the asset may have been
            // removed, paused or failed, the engine stopped, or a rule may now block the queue.
            guard let current = stillWanted(assetId) else { return }
            queued = current
        }
        if queued.license?.isUsable != true {
            guard await acquireLicense(for: queued, plan: plan, grant: grant), let current = stillWanted(assetId) else { return }
            queued = current
        }
        // As it is now: a new URL may have come while the steps above awaited (`updateURL`
        // planned it anew and kept that plan).
        if queued.request != plannedFor {
            guard let replanned = await self.plan(for: queued), let current = stillWanted(assetId) else { return }
            (plan, plannedFor, queued) = (replanned, queued.request, current)
            // (Another URL still, from the await just now: the next pass takes it.)
            guard queued.request == plannedFor else { return }
        }
        let request = queued.request
        let directory = content.directory(for: assetId)
        // Playable while it downloads from here (permission and license are in) until its
        // record is an asset's or it stopped: `planInProgress`.
        let session = downloadingNow.withLock { now in
            now.count += 1
            now.current = (assetId, now.count, plan)
            return now.count
        }
        defer { downloadingNow.withLock { if $0.current?.session == session { $0.current = nil } } }
        if queued.bytesDownloaded == 0, queued.errorCount == 0 { events.log(.downloadStart(assetId: assetId)) }
        setStatus(.downloading(assetId: assetId))
        events.tellApp(.downloadStarted(assetId: assetId))
        let started = ContinuousClock.now
        let requirements = requirements
        let completedBytes = requirements.completedSize()
        // The ceiling is what the asset could ever hold, less what it holds: an HLS asset whose
        // files add up past it fails on the file that would pass it, instead of waiting for room.
        let ceiling = requirements.storageCeiling()
        let budget = StorageBudget(
            requirements.storageRoom(assetBytes: queued.bytesDownloaded, completedBytes: completedBytes),
            ceiling: ceiling.subtractingClamped(queued.bytesDownloaded))
        let progress = ProgressReporter(assetId: assetId, database: database, events: events)
        tasks.withLock { $0.progress = progress }
        noteUnflushed(assetId)
        let task = Task { [downloader, content] in
            try await downloader.download(
                request, plan: plan, in: directory, relativeTo: content.root, budget: budget,
                beforeFile: { [weak self] assetBytes in
                    guard let self else { throw CancellationError() }
                    if let reason = self.requirements.deviceBlock() { throw Blocked(reason: reason) }
                    budget.reset(
                        to: requirements.storageRoom(assetBytes: assetBytes, completedBytes: completedBytes),
                        ceiling: max(ceiling.subtractingClamped(assetBytes), 0))
                },
                progress: { progress.report($0) },
                ancillaryFailed: { [events] file, failure in
                    let message = "The ancillary file \(file.tag) could not be downloaded: \(failure)"
                    events.record(
                        .downloadWarning(
                            assetId: assetId, code: "ancillaryFailed", message: String(message.prefix(utf8Bytes: WireLimits.maxEventMessageBytes))),
                        tellingApp: .downloadWarning(assetId: assetId, message: message))
                })
        }
        tasks.withLock { $0.current = (assetId, task) }
        let result = await task.result
        progress.flush()
        tasks.withLock {
            // Only its own: after a stop and a start, a newer loop's may be there.
            if $0.current?.task == task { $0.current = nil }
            if $0.progress === progress { $0.progress = nil }
        }
        var outOfRoom = false
        switch result {
        case .success(let asset):
            completed(asset, after: ContinuousClock.now - started)
            return
        case .failure(let blocked as Blocked):
            setBlock(blocked.reason)
        case .failure(let failure as DownloadFailure) where failure.kind == .noSpace:
            blockOnStorage()
            outOfRoom = true
        case .failure(let failure as DownloadFailure) where failure.isExpiredURL:
            // A signed URL that expired: a fresh one first, and the download goes on from it.
            if !(await refreshURL(of: assetId, after: failure)) { failed(assetId, failure) }
        case .failure(let failure as DownloadFailure):
            failed(assetId, failure)
        case .failure:
            // Cancelled: by stop(), a pause, a removal or a rule; whoever cancelled has said why.
            break
        }
        // Recorded first: the flush awaits, and the app's calls run meanwhile.
        await flushStopped(assetId)
        if outOfRoom { _ = await signal.wait(upTo: options.storageRecheck) }
    }

    /// The queue waits for more room than the storage rules leave now (the head of the queue ran
    /// out of it, or its estimate does not fit): until an asset is deleted, space is freed or
    /// `storageRecheck` passes.
    func blockOnStorage() {
        state.ranOutOfRoom(requirements.storageRoom(assetBytes: 0))
        setBlock(.storage)
        setStatus(.blocked(.storage))
    }

    /// Whether `assetId` is the asset being downloaded now.
    nonisolated func isDownloading(_ assetId: String) -> Bool {
        tasks.withLock { $0.current?.assetId == assetId }
    }

    /// Records the status and tells the app, except between `stopped` and `idle`: an engine
    /// with nothing to download starting or stopping is no news.
    private func setStatus(_ next: DownloadEngineStatus) {
        if state.setStatus(next).tellsApp { events.tellApp(.downloadEngineStatusChanged(next)) }
    }

    private func setBlock(_ next: DownloadBlock?) {
        if state.setBlock(next) { events.tellApp(next.map { .downloadsBlocked($0) } ?? .downloadsUnblocked) }
    }

    /// Thrown from `beforeFile` when a rule stops the download between files.
    private struct Blocked: Error {
        var reason: DownloadBlock
    }

    // MARK: what the app and the commands ask

    /// A queued asset as the app sees it: with the progress heard, when it is downloading.
    nonisolated func withLiveProgress(_ queued: QueuedDownload) -> QueuedDownload {
        guard let progress = tasks.withLock({ $0.progress }), progress.assetId == queued.assetId, let last = progress.last else { return queued }
        var queued = queued
        queued.bytesDownloaded = last.bytes
        queued.expectedBytes = last.expected
        queued.expectedIsEstimate = last.isEstimate
        return queued
    }

    /// Cancels the asset download under way if it is one of `assetIds` (any when nil), and
    /// waits until it has stopped writing, for at most `limit`: a fetch that does not notice
    /// its cancellation must not hold a remote wipe. Were it to write on after that, it writes
    /// into a partial file already unlinked, and its rename fails.
    func cancelCurrent(ifAmong assetIds: [String]?, within limit: Duration = .seconds(5)) async {
        let current = tasks.withLock { tasks -> Task<LocalAsset, any Error>? in
            guard let current = tasks.current, assetIds?.contains(current.assetId) ?? true else { return nil }
            return current.task
        }
        guard let current else { return }
        current.cancel()
        _ = await current.waitForCompletion(upTo: limit)
    }
}
