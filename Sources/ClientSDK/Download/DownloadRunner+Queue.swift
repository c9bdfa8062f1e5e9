import Foundation
import BackplaneWire

// What the app (through `DownloadManager`) and the remote commands ask of the download queue.
// Each change is stored first, then the loop is woken to act on it.
extension DownloadRunner {
    /// Checks `request`, fetches an HLS asset's playlists, asks the backplane's permission when
    /// the app asks it at queue time, and queues it at `index` (nil: at the end). An asset
    /// already queued or downloaded is returned as it is. Playlists that cannot be fetched for
    /// a passing reason (no network, a timeout, a 5xx, no room yet) do not stop the queueing:
    /// the engine fetches them when the download starts, under the rule of threes; only a
    /// playlist that can never be downloaded (not a playlist, malformed, live, too large, a
    /// 4xx) is refused here.
    func enqueue(_ request: DownloadRequest, at index: Int?) async throws -> DownloadAsset {
        if let problem = request.problem { throw BackplaneClientError(kind: .invalidInput, message: problem) }
        if let known = try asset(request.assetId) {
            // Asking again for an asset that failed is asking to try it again (a user who taps
            // Download twice, a script run twice): its retries are cleared, as `clearRetries`
            // does, rather than the failure returned to wait on in silence.
            guard case .failed = known.state else { return known }
            try clearRetries([request.assetId])
            return try asset(request.assetId) ?? known
        }
        guard state.beginPreparing(request.assetId) else {
            throw BackplaneClientError(kind: .invalidInput, message: "Asset \(request.assetId) is being queued already.")
        }
        defer { state.endPreparing(request.assetId) }
        var estimate: (bytes: Int64, basis: EstimateBasis)?
        do {
            let plan = try await prepareWithinDeadline(request)
            // What it will take, shown on the asset and checked before its download starts.
            estimate = await estimator.estimate(plan)
        } catch where error.isPassing {
            // Queued all the same; what was fetched is fetched again when the download starts.
            try? content.removeFiles(of: request.assetId)
        } catch {
            try? content.removeFiles(of: request.assetId)
            throw BackplaneClientError(kind: .download, message: "Asset \(request.assetId) cannot be queued: \(error)", underlying: error)
        }
        let grant: DownloadGrant?
        do {
            grant = options.permissionTiming == .atQueueTime && permission.isNeeded() ? try await permission.askAtQueueTime(for: request) : nil
        } catch {
            try? content.removeFiles(of: request.assetId)
            throw error
        }
        let added = try database.access { try $0.enqueueDownload(request, at: index, estimate: estimate) }
        // With no await between, the loop cannot take the asset before its grant is recorded.
        if let grant { try database.adoptGrant(grant.grantId, window: grant.window, assetId: request.assetId) }
        // Not added: queued meanwhile by another path, returned as it is.
        guard let queued = try asset(request.assetId) else { throw notQueued(request.assetId) }
        guard added else { return queued }
        events.record(.queuedForDownload(assetId: request.assetId), tellingApp: .downloadQueued(queued))
        signal.signal()
        return queued
    }

    /// How long queueing may spend fetching an HLS asset's playlists (a slow origin within
    /// `minimumTransferRate` could take hours); past it the asset is queued all the same, and the
    /// engine fetches them when the download starts.
    static let queueingDeadline = Duration.seconds(60)

    /// The asset's plan made (`DownloadPlanner.prepare`) under `queueingDeadline`; running past it is a passing fault.
    private func prepareWithinDeadline(_ request: DownloadRequest) async throws(DownloadFailure) -> DownloadPlan {
        let (downloader, directory) = (downloader, content.directory(for: request.assetId))
        let (room, ceiling) = (requirements.storageRoom(assetBytes: 0), requirements.storageCeiling())
        let outcome = await withTaskGroup(of: Result<DownloadPlan, DownloadFailure>?.self) { group in
            group.addTask {
                do throws(DownloadFailure) {
                    return .success(try await downloader.prepare(request, in: directory, room: room, ceiling: ceiling))
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                try? await Task.sleep(for: Self.queueingDeadline)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        switch outcome {
        case .success(let plan)?: return plan
        case .failure(let failure)?: throw failure
        case nil: throw DownloadFailure(.network, "The playlists of \(request.assetId) took more than \(Self.queueingDeadline) to fetch.")
        }
    }

    /// Moves a queued asset to `index`; the asset downloading now goes on.
    func move(_ assetId: String, to index: Int) throws {
        guard try database.access({ try $0.moveDownload(assetId: assetId, to: index) }) else { throw notQueued(assetId) }
        state.queueChanged()
        signal.signal()
    }

    /// Takes assets off the device, whatever the reason (the user, a remote command, a wipe, a
    /// subscription's quota): queued ones out of the queue, the one downloading stopped;
    /// downloaded ones deleted. Files go, licenses are released, and each asset gets the same
    /// events: `removedFromQueue` or `assetDeleted(reason)` logged, `downloadRemoved(reason)`
    /// announced (`ContentStore.removeDequeued` and `removeDownloaded`, which say it once).
    @discardableResult
    func remove(_ selection: AssetSelection, reason: AssetDeletionReason) async throws -> AssetRemoval {
        // Out of the queue before the wait for the download to stop: the loop, which goes on
        // while this waits, must not pick the asset up again.
        let licensed = try database.access { try $0.assetIdsHoldingLicense(queued: true) }
        let dequeued = try database.access { try $0.removeDownloads(selection.assetIds) }
        await cancelCurrent(ifAmong: selection.assetIds)
        state.dequeued(dequeued)
        content.removeDequeued(dequeued, licensed: licensed, reason: reason)
        let deleted = selection.includesDownloaded ? try content.removeDownloaded(selection.assetIds, reason: reason) : []
        signal.signal()
        return AssetRemoval(dequeued: dequeued, deleted: deleted)
    }

    /// Pauses these assets (all when nil); the one downloading stops, keeping its partial files.
    func pause(_ assetIds: [String]?) async throws {
        try update(assetIds) { $0.paused = true }
        await cancelCurrent(ifAmong: assetIds)
    }

    func resume(_ assetIds: [String]?) throws {
        try update(assetIds) { $0.paused = false }
        signal.signal()
    }

    /// Clears the error counts (rule of threes) of these assets (all when nil), so that failed
    /// ones are tried again.
    func clearRetries(_ assetIds: [String]?) throws {
        try update(assetIds) { download in
            download.errorCount = 0
            download.failed = false
        }
        state.retriesCleared(assetIds)
        if let assetIds {
            for assetId in assetIds { events.log(.maxErrorsReset(assetId: assetId)) }
        } else {
            events.log(.maxErrorsReset())
        }
        signal.signal()
    }

    /// The app's master switch; off stops the download under way.
    func setEnabled(_ enabled: Bool) async throws {
        try database.access { try $0.save(enabled ? nil : true, .downloadsSwitchedOff) }
        if !enabled { await cancelCurrent(ifAmong: nil) }
        signal.signal()
    }

    var isEnabled: Bool {
        get throws { try !(database.access { try $0.load(Bool.self, .downloadsSwitchedOff) } ?? false) }
    }

    /// The queue in order (completed assets are not in it).
    func queue() throws -> [DownloadAsset] {
        let block = currentBlock()
        let queue = try database.access { try $0.queuedDownloads() }.map(withLiveProgress)
        let shortfalls = storageShortfalls(of: queue)
        return queue.map { queued in
            let shortfall = shortfalls[queued.assetId]
            return DownloadAsset(queued: queued, state: state(of: queued, block: block, shortfall: shortfall), shortfall: shortfall)
        }
    }

    /// A queued or completed asset.
    func asset(_ assetId: String) throws -> DownloadAsset? {
        if try database.access({ try $0.queuedDownload(assetId: assetId) }) != nil {
            return try queue().first { $0.assetId == assetId }
        }
        return try database.access { try $0.asset(assetId: assetId) }.map { DownloadAsset(completed: $0, root: content.root) }
    }

    /// `block`: the rule that stops the queue now, if any; `shortfall`: the bytes the asset
    /// lacks under the storage rules, after the queue ahead of it.
    private func state(of queued: QueuedDownload, block: DownloadBlock?, shortfall: Int64?) -> DownloadState {
        if queued.failed { return .failed(queued.lastFailure ?? DownloadFailure(.network, "Failed.")) }
        if queued.paused { return .paused }
        if case .downloading(queued.assetId) = state.status { return .downloading }
        if let block { return .blocked(block) }
        if shortfall != nil { return .blocked(.storage) }
        if queued.denial != nil { return .blocked(.permissionDenied) }
        return .pending
    }

    /// What each of the queue's assets that may download lacks under the storage rules once the
    /// assets ahead of it have their estimates (`estimatedBytes`; an asset without one counts
    /// nothing), the bytes they already hold left out of both.
    private func storageShortfalls(of queue: [QueuedDownload]) -> [String: Int64] {
        let runnable = queue.filter { !$0.paused && !$0.failed }
        guard runnable.contains(where: { $0.estimatedBytes != nil }) else { return [:] }
        let held = runnable.reduce(Int64(0)) { $0.addingClamped(max($1.bytesDownloaded, 0)) }
        let room = requirements.storageRoom(assetBytes: held)
        let ceiling = requirements.storageCeiling()
        var needed: Int64 = 0
        var shortfalls: [String: Int64] = [:]
        for queued in runnable {
            guard let estimate = queued.estimateToFit(ceiling: ceiling) else { continue }
            needed = needed.addingClamped(max(estimate.subtractingClamped(queued.bytesDownloaded), 0))
            if needed > room { shortfalls[queued.assetId] = needed - room }
        }
        return shortfalls
    }

    /// The size `request` would take and the room it would have at the end of the queue, worked
    /// out from its manifests (fetched into a scratch directory, then deleted) and the origin's
    /// answers, without queueing it.
    func estimate(_ request: DownloadRequest) async throws -> DownloadEstimate {
        if let problem = request.problem { throw BackplaneClientError(kind: .invalidInput, message: problem) }
        let scratch = content.scratchDirectory()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let plan: DownloadPlan
        do {
            // The manifests are deleted again: held to their own budget only, not the storage rules.
            plan = try await downloader.planners.planner(for: request.kind).prepare(request, in: scratch, room: .max, ceiling: .max)
        } catch {
            throw BackplaneClientError(kind: .download, message: "The size of \(request.assetId) cannot be estimated: \(error)", underlying: error)
        }
        guard let size = await estimator.estimate(plan) else {
            throw BackplaneClientError(kind: .download, message: "The size of \(request.assetId) cannot be estimated: the origin stated no size for its files (HEAD, a ranged GET) and the manifest no bandwidth.")
        }
        let queue = try database.access { try $0.queuedDownloads() }.map(withLiveProgress).filter { !$0.paused && !$0.failed && $0.assetId != request.assetId }
        let held = queue.reduce(Int64(0)) { $0.addingClamped(max($1.bytesDownloaded, 0)) }
        let ceiling = requirements.storageCeiling()
        let ahead = queue.reduce(Int64(0)) { $0.addingClamped(max(($1.estimateToFit(ceiling: ceiling) ?? 0).subtractingClamped($1.bytesDownloaded), 0)) }
        return DownloadEstimate(bytes: size.bytes, basis: size.basis, room: max(requirements.storageRoom(assetBytes: held).subtractingClamped(ahead), 0))
    }

    private func update(_ assetIds: [String]?, _ change: (inout QueuedDownload) -> Void) throws {
        try database.access { database in
            if let assetIds {
                for assetId in assetIds where try database.updateDownload(assetId: assetId, change) == nil { throw notQueued(assetId) }
            } else {
                try database.updateAllDownloads(change)
            }
        }
    }

    private func notQueued(_ assetId: String) -> BackplaneClientError {
        BackplaneClientError(kind: .invalidInput, message: "Asset \(assetId) is not in the download queue.")
    }
}

extension DownloadAsset {
    init(queued: QueuedDownload, state: DownloadState, shortfall: Int64? = nil) {
        self.init(
            request: queued.request, state: state, bytesDownloaded: queued.bytesDownloaded, expectedBytes: queued.expectedBytes,
            expectedBytesIsEstimate: queued.expectedIsEstimate, errorCount: queued.errorCount, lastFailure: queued.lastFailure,
            position: queued.position, addedAt: queued.addedAt, completedAt: nil,
            permission: queued.grantId.map { .granted(grantId: $0) } ?? queued.denial.map { .denied($0) } ?? .notAsked, localURL: nil,
            estimatedBytes: queued.estimatedBytes, storageShortfall: shortfall)
    }

    init(completed asset: LocalAsset, root: URL) {
        let request = asset.request ?? DownloadRequest(assetId: asset.assetId, url: root.appendingPathComponent(asset.relativePath))
        self.init(
            request: request, state: .completed, bytesDownloaded: asset.size, expectedBytes: asset.size,
            expectedBytesIsEstimate: false, errorCount: 0, lastFailure: nil, position: nil, addedAt: asset.addedAt,
            completedAt: asset.addedAt, permission: asset.grantId.map { .granted(grantId: $0) } ?? .notAsked,
            localURL: root.appendingPathComponent(asset.relativePath),
            ancillaries: request.ancillaries.compactMap { file in
                // Those on the device: one that failed to download was left out.
                let url = root.appendingPathComponent(ContentStore.directoryName(for: asset.assetId), isDirectory: true)
                    .appendingPathComponent(file.relativePath, isDirectory: false)
                return LocalFiles.size(of: url) != nil ? DownloadedAncillary(tag: file.tag, localURL: url) : nil
            })
    }
}

/// Which assets `DownloadRunner.remove` takes off the device.
enum AssetSelection: Sendable, Equatable {
    /// These, queued or downloaded.
    case assets([String])
    /// These if they are queued (all queued assets when nil); downloaded ones stay.
    case queued([String]?)
    /// Every asset, queued or downloaded, and any stray file in the content directory.
    case everything

    /// Every queued asset; downloaded ones stay.
    static let wholeQueue = AssetSelection.queued(nil)

    /// The ids, nil for all.
    var assetIds: [String]? {
        switch self {
        case .assets(let ids): ids
        case .queued(let ids): ids
        case .everything: nil
        }
    }

    var includesDownloaded: Bool {
        if case .queued = self { return false }
        return true
    }
}

/// What `DownloadRunner.remove` took off the device.
struct AssetRemoval: Sendable, Equatable {
    /// Taken out of the queue (a download under way stopped), partial files deleted.
    var dequeued: [String] = []
    /// Downloaded assets deleted, files and records.
    var deleted: [String] = []

    var all: [String] { dequeued + deleted }
}
