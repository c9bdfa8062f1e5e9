import Foundation
import BackplaneWire

// The steps before an asset's files come: an asset already past its expiry date leaves the
// queue, its plan and size are known (one that cannot fit waits), the backplane is asked for permission (`DownloadPermission`, its outcome applied to the
// pass here), the app's provider for a license.
extension DownloadRunner {
    /// Takes the asset out of the queue as expired when its expiry date (its own or the granted
    /// one) has passed on time confirmed by a sync: fetching it would only feed the sweep.
    func leftExpired(_ queued: QueuedDownload) async -> Bool {
        guard let expiry = [queued.window?.expiryDate, queued.request.availability?.expiryDate].compactMap({ $0 }).min(),
              clock.isConfirmed, let now = clock.now().date, expiry <= now
        else { return false }
        guard (try? await remove(.assets([queued.assetId]), reason: .internal))?.dequeued.isEmpty == false else { return false }
        events.record(.assetExpired(assetId: queued.assetId), tellingApp: .assetExpired(assetId: queued.assetId, reason: .expiryDate))
        return true
    }

    /// The asset's plan, once per download, handed on by value to every step that needs it: its
    /// request's for a flat file, else the one kept when it was queued, made now when there is
    /// none (the asset was queued while its origin could not be reached). A failure to make it is
    /// this pass's failure, recorded; no room for its manifests blocks the queue on storage.
    func plan(for queued: QueuedDownload) async -> DownloadPlan? {
        let downloader = downloader.planners.planner(for: queued.request.kind)
        let directory = content.directory(for: queued.assetId)
        if let plan = downloader.preparedPlan(queued.request, in: directory) { return plan }
        do {
            let plan = try await downloader.prepare(
                queued.request, in: directory, room: requirements.storageRoom(assetBytes: 0), ceiling: requirements.storageCeiling())
            // Removed while its manifests came: they go too.
            guard (try? database.queuedDownload(assetId: queued.assetId)) != nil else {
                try? content.removeFiles(of: queued.assetId)
                return nil
            }
            return plan
        } catch where error.kind == .noSpace {
            blockOnStorage()
        } catch {
            // An expired URL is refreshed first; the download is then tried again at once.
            if await refreshURL(of: queued.assetId, after: error) { return nil }
            failed(queued.assetId, error)
        }
        return nil
    }

    /// The asset with its size estimated from its plan (`SizeEstimator`) and stored; nil when
    /// the asset left the queue meanwhile. An origin that does not say enough leaves the
    /// estimate unknown, and the download goes on.
    func estimated(_ queued: QueuedDownload, plan: DownloadPlan) async -> QueuedDownload? {
        guard let estimate = await estimator.estimate(plan) else {
            state.estimateUnanswered(queued.assetId)
            return stillWanted(queued.assetId)
        }
        return stillWanted(queued.assetId).flatMap { _ in
            try? database.updateDownload(assetId: queued.assetId) { download in
                download.estimatedBytes = estimate.bytes
                download.estimateBasis = estimate.basis
            }
        }
    }

    /// The asset with its size estimated from `plan`, when it fits under the storage rules now;
    /// nil when it waits for room (the queue blocks on storage until there is more), failed (it
    /// is known to be larger than the rules could ever allow), or left the queue meanwhile.
    func sizedToFit(_ queued: QueuedDownload, plan: DownloadPlan) async -> QueuedDownload? {
        var queued = queued
        if queued.estimatedBytes == nil, state.shouldEstimate(queued.assetId) {
            guard let estimated = await estimated(queued, plan: plan) else { return nil }
            queued = estimated
        }
        let ceiling = requirements.storageCeiling()
        guard let estimate = queued.estimateToFit(ceiling: ceiling) else { return queued }
        if estimate > ceiling {
            // As a file declared that large is: the asset's error, not a wait for room.
            failed(queued.assetId, DownloadFailure(.origin, "\(queued.assetId) takes \(estimate) bytes, more than the storage rules could ever hold (\(ceiling))."))
            return nil
        }
        if estimate.subtractingClamped(queued.bytesDownloaded) > requirements.storageRoom(assetBytes: queued.bytesDownloaded) {
            blockOnStorage()
            _ = await signal.wait(upTo: options.storageRecheck)
            return nil
        }
        return queued
    }

    /// Asks the backplane (`DownloadPermission`) and applies its answer to the pass: the grant
    /// when the download may start, nil when the asset waits.
    func permission(for queued: QueuedDownload) async -> DownloadGrant? {
        let assetId = queued.assetId
        // A sync that ends while the backplane is asked may have freed the place it denies.
        let syncsBefore = state.syncsSeen
        switch await permission.ask(for: queued) {
        case .granted(let grant):
            return grant
        case .later(deniedByRule: false):
            state.toldToWait(assetId)
        case .later(deniedByRule: true):
            // A sync ended meanwhile: the denial may be out of date, and the asset is asked again now.
            guard state.syncsSeen == syncsBefore else { break }
            state.deniedByRule(assetId)
        case .noAnswer:
            state.permissionUnanswered(assetId, withoutGrant: Array((try? database.runnableDownloadIdsWithoutGrant()) ?? []))
        case .deniedForGood(let failure):
            failed(assetId, failure, forGood: true)
        case .notQueued:
            break
        }
        return nil
    }

    /// After a sync: the backplane has heard of the deletions and failures that free places,
    /// so assets denied by a rule that can change are asked again without waiting for the
    /// next retry pass.
    func retryDenied() {
        if state.syncEnded() { signal.signal() }
    }

    /// Asks the app's license provider for the asset's license before its files come; its
    /// outcome is stored with the asset. False when it failed (a try of the download that failed),
    /// or when the backplane or its license server did not answer (offline, 5xx): that is not the
    /// asset's failure, and it waits, as a permission without an answer does, to be asked again
    /// on a later pass, before any file.
    func acquireLicense(for queued: QueuedDownload, plan: DownloadPlan, grant: DownloadGrant?) async -> Bool {
        // A grant from an earlier pass (or from queue time) gets a fresh entitlement.
        var entitlement = grant?.entitlement
        if entitlement == nil, let grantId = queued.grantId {
            entitlement = await permission.freshEntitlement(assetId: queued.assetId, grantId: grantId)
        }
        // A DASH or Smooth Streaming license is made from the manifest's PSSH, which the plan keeps.
        let request = LicenseRequest(
            assetId: queued.assetId, url: queued.request.url, kind: queued.request.kind, entitlement: entitlement,
            window: grant?.window ?? queued.window, contentProtection: plan.contentProtection ?? [], keyIds: plan.keyIds ?? [],
            grantId: grant?.grantId ?? queued.grantId)
        do {
            let license = try await licenses.acquireLicense(for: request)
            try database.recordLicense(license, assetId: queued.assetId)
            return true
        } catch let error as BackplaneClientError where error.isTransient {
            state.permissionUnanswered(queued.assetId, withoutGrant: [])
            return false
        } catch {
            let message = "The license provider failed: \(error)"
            try? database.recordLicense(.failed(message), assetId: queued.assetId)
            failed(queued.assetId, DownloadFailure(.license, message))
            return false
        }
    }

    /// The queued download as it is now, if it should still start: the actor ran other calls
    /// during an await, so the asset may have been removed, paused or failed, the engine
    /// stopped, or a rule may now block the queue.
    func stillWanted(_ assetId: String) -> QueuedDownload? {
        guard lifecycle.isRunning, !Task.isCancelled, currentBlock() == nil, state.mayStart(assetId),
              let current = try? database.queuedDownload(assetId: assetId), !current.paused, !current.failed
        else { return nil }
        return current
    }
}
