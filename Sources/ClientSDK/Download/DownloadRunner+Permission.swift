import Foundation
import BackplaneWire

// The steps before an asset's files come: an asset already past its expiry date leaves the
// queue, the backplane is asked for permission, the app's provider for a license. Apart from
// the loop so that each file has one job.
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

    /// Whether the backplane must be asked before a download starts: when the application sets
    /// a download limit, or always if the app says so.
    func needsPermission() -> Bool {
        if options.askPermission == .always { return true }
        guard let settings = snapshot.current?.settings else { return true }
        return [settings.maxDownloadsPerDevice, settings.maxDownloadsPerAccount, settings.maxLifetimeDownloadsPerAsset,
                settings.maxCopiesPerAccount].contains { $0 >= 0 }
    }

    /// Asks the backplane; the grant when the download may start (it is recorded with its
    /// window). A denial by a rule that can change, or no answer, leaves the asset for the next
    /// pass; a lifetime denial fails it.
    func permission(for queued: QueuedDownload) async -> DownloadGrant? {
        let assetId = queued.assetId
        // A sync that ends while the backplane is asked may have freed the place it denies.
        let syncsBefore = syncsSeen
        do {
            guard let grant = try await askBackplane(for: queued.request) else {
                erroredThisPass.insert(assetId)
                return nil
            }
            return try local.recordGrant(grant.grantId, window: grant.window, forDownload: assetId) ? grant : nil
        } catch let error as BackplaneClientError where error.code == .downloadLimitReached {
            let denial = Self.denial(from: error)
            let failure = DownloadFailure(.permissionDenied, error.message)
            _ = try? local.updateDownload(assetId: assetId) { download in
                download.lastFailure = failure
                download.denial = denial
            }
            // Stored first: whoever hears of it finds the asset as it now is.
            announce(denial, assetId: assetId)
            if denial.permanent {
                failed(assetId, failure, forGood: true)
            } else if syncsSeen == syncsBefore {
                erroredThisPass.insert(assetId)
                deniedThisPass.insert(assetId)
            }
        } catch let error as BackplaneClientError where error.code == .downloadNotEnabled {
            // The backplane turned download off since the last sync: a sync now says so, and
            // the queue blocks until it is on again.
            _ = try? local.updateDownload(assetId: assetId) { $0.lastFailure = DownloadFailure(.permissionDenied, error.message) }
            erroredThisPass.insert(assetId)
            requestSync()
        } catch let error as BackplaneClientError where error.isTransient {
            // No answer (offline, a 5xx, 429): no asset is asked for again in this pass (those
            // already granted go on). Asking for the next at once would get the same answer, and
            // a 429 for each would keep the device's bucket empty, so that its syncs are refused too.
            erroredThisPass.insert(assetId)
            erroredThisPass.formUnion((try? local.runnableDownloadIdsWithoutGrant()) ?? [])
        } catch {
            // Refused for this asset alone, or the engine stopping: asked again at the next pass.
            erroredThisPass.insert(assetId)
        }
        return nil
    }

    /// `PermissionTiming.atQueueTime`: asks before the asset is queued. A denial, or download
    /// turned off, is thrown (nothing is queued); no answer returns nil, and the asset is asked
    /// for again when its download starts.
    func permissionAtQueueTime(for request: DownloadRequest) async throws -> DownloadGrant? {
        do {
            return try await askBackplane(for: request)
        } catch let error as BackplaneClientError where error.code == .downloadLimitReached {
            announce(Self.denial(from: error), assetId: request.assetId)
            throw error
        } catch let error as BackplaneClientError where error.code == .downloadNotEnabled {
            requestSync()
            throw error
        } catch {
            return nil
        }
    }

    /// One `POST /v1/download-grants`; nil for a grant the SDK cannot keep (another asset's, or
    /// an id the backplane would refuse in a report, which would stop every later sync).
    private func askBackplane(for request: DownloadRequest) async throws -> DownloadGrant? {
        let response = try await askBackplane(
            DownloadPermissionRequest(assetId: request.assetId, maxLifetimeDownloads: request.maxLifetimeDownloads))
        let grantId = response.grant.grantId
        guard response.grant.assetId == request.assetId, !grantId.isEmpty, grantId.utf8.count <= WireLimits.maxIdentifierLength,
              !grantId.unicodeScalars.contains(where: { CharacterSet.controlCharacters.contains($0) })
        else { return nil }
        return response.grant
    }

    /// The denial a `download_limit_reached` answer carries.
    private static func denial(from error: BackplaneClientError) -> DownloadDenial {
        let rule = error.details?["rule"]?.stringValue.flatMap(DownloadRule.init(rawValue:)) ?? .account
        let counts = error.details?["counts"].flatMap { try? JSONDecoder().decode(DownloadCounts.self, from: JSONEncoder().encode($0)) }
        return DownloadDenial(rule: rule, counts: counts, permanent: rule.isPermanent)
    }

    /// Logs `downloadLimitReached` and emits `downloadDenied`.
    private func announce(_ denial: DownloadDenial, assetId: String) {
        _ = try? eventLogger.log(.downloadLimitReached(Self.limitType(denial.rule), assetId: assetId))
        broadcaster.emit(.downloadDenied(assetId: assetId, rule: denial.rule, counts: denial.counts, permanent: denial.permanent))
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
            entitlement = await LicenseRequest.freshEntitlement(assetId: queued.assetId, grantId: grantId, ask: askBackplane)
        }
        let request = LicenseRequest(
            assetId: queued.assetId, url: queued.request.url, kind: queued.request.kind, entitlement: entitlement,
            window: grant?.window ?? queued.window)
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

    private static func limitType(_ rule: DownloadRule) -> DownloadLimitType {
        switch rule {
        case .assetLifetime: .asset
        case .account: .account
        case .copies: .copies
        case .device: .device
        }
    }
}
