import Foundation
import BackplaneWire

// The steps before an asset's files come: an asset already past its expiry date leaves the
// queue, the backplane is asked for permission (`DownloadPermission`, its outcome applied to the
// pass here), the app's provider for a license.
extension DownloadRunner {
    /// Takes the asset out of the queue as expired when its expiry date (its own or the granted
    /// one) has passed on time confirmed by a sync: fetching it would only feed the sweep.
    func leftExpired(_ queued: QueuedDownload) async -> Bool {
        guard let expiry = [queued.window?.expiryDate, queued.request.availability?.expiryDate].compactMap({ $0 }).min(),
              clock.isConfirmed, let now = clock.now().date, expiry <= now
        else { return false }
        guard (try? await remove([queued.assetId], reason: .internal))?.isEmpty == false else { return false }
        _ = try? eventLogger.log(.assetExpired(assetId: queued.assetId))
        broadcaster.emit(.assetExpired(assetId: queued.assetId, reason: .expiryDate))
        return true
    }

    /// Asks the backplane (`DownloadPermission`) and applies its answer to the pass: the grant
    /// when the download may start, nil when the asset waits.
    func permission(for queued: QueuedDownload) async -> DownloadGrant? {
        let assetId = queued.assetId
        // A sync that ends while the backplane is asked may have freed the place it denies.
        let syncsBefore = syncsSeen
        switch await permission.ask(for: queued) {
        case .granted(let grant):
            return grant
        case .later(deniedByRule: false):
            erroredThisPass.insert(assetId)
        case .later(deniedByRule: true):
            // A sync ended meanwhile: the denial may be out of date, and the asset is asked again now.
            guard syncsSeen == syncsBefore else { break }
            erroredThisPass.insert(assetId)
            deniedThisPass.insert(assetId)
        case .noAnswer:
            erroredThisPass.insert(assetId)
            erroredThisPass.formUnion((try? local.runnableDownloadIdsWithoutGrant()) ?? [])
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
        syncsSeen += 1
        guard !deniedThisPass.isEmpty else { return }
        erroredThisPass.subtract(deniedThisPass)
        deniedThisPass = []
        signal.signal()
    }

    /// Asks the app's license provider for the asset's license before its files come; its
    /// outcome is stored with the asset. False when it failed (a try of the download that failed).
    func acquireLicense(for queued: QueuedDownload, grant: DownloadGrant?) async -> Bool {
        // A grant from an earlier pass (or from queue time) gets a fresh entitlement.
        var entitlement = grant?.entitlement
        if entitlement == nil, let grantId = queued.grantId {
            entitlement = await permission.freshEntitlement(assetId: queued.assetId, grantId: grantId)
        }
        // A DASH license is made from the manifest's PSSH: an asset queued offline has its plan
        // made now, before the provider is asked.
        let directory = content.directory(for: queued.assetId)
        var plan = DownloadPlan.kept(in: directory)
        if plan == nil, queued.request.kind == .dash {
            do {
                plan = try await downloader.downloaders.downloader(for: .dash).prepare(
                    queued.request, in: directory, room: requirements.storageRoom(assetBytes: 0), ceiling: requirements.storageCeiling())
            } catch {
                failed(queued.assetId, error)
                return false
            }
        }
        let request = LicenseRequest(
            assetId: queued.assetId, url: queued.request.url, kind: queued.request.kind, entitlement: entitlement,
            window: grant?.window ?? queued.window, contentProtection: plan?.contentProtection ?? [])
        do {
            let license = try await licenses.acquireLicense(for: request)
            try local.recordLicense(license, assetId: queued.assetId)
            return true
        } catch {
            let message = "The license provider failed: \(error)"
            try? local.recordLicense(.failed(message), assetId: queued.assetId)
            failed(queued.assetId, DownloadFailure(.license, message))
            return false
        }
    }

    /// The queued download as it is now, if it should still start: the actor ran other calls
    /// during an await, so the asset may have been removed, paused or failed, the engine
    /// stopped, or a rule may now block the queue.
    func stillWanted(_ assetId: String) -> QueuedDownload? {
        guard lifecycle.isRunning, !Task.isCancelled, currentBlock() == nil,
              let current = try? local.queuedDownload(assetId: assetId), !current.paused, !current.failed
        else { return nil }
        return current
    }
}
