import Foundation
import BackplaneWire

// The permission step of a download: the backplane is asked before an asset starts, and its
// answer is recorded or acted on. Apart from the loop so that each file has one job.
extension DownloadRunner {
    /// Whether the backplane must be asked before a download starts: when the application sets
    /// a download limit, or always if the app says so.
    func needsPermission() -> Bool {
        if options.askPermission == .always { return true }
        guard let settings = snapshot.current?.settings else { return true }
        return [settings.maxDownloadsPerDevice, settings.maxDownloadsPerAccount, settings.maxLifetimeDownloadsPerAsset,
                settings.maxCopiesPerAccount].contains { $0 >= 0 }
    }

    /// Asks the backplane; true when the download may start (the grant is recorded with it).
    /// A denial by a rule that can change, or no answer, leaves the asset for the next pass; a
    /// lifetime denial fails it.
    func permission(for queued: QueuedDownload) async -> Bool {
        let assetId = queued.assetId
        do {
            let response = try await askBackplane(DownloadPermissionRequest(assetId: assetId))
            let grantId = response.grant.grantId
            // A grant id the backplane would refuse in a report would stop every later sync.
            guard response.grant.assetId == assetId, !grantId.isEmpty, grantId.utf8.count <= WireLimits.maxIdentifierLength,
                  !grantId.unicodeScalars.contains(where: { CharacterSet.controlCharacters.contains($0) })
            else {
                erroredThisPass.insert(assetId)
                return false
            }
            return try local.recordGrant(grantId, forDownload: assetId)
        } catch let error as BackplaneClientError where error.code == .downloadLimitReached {
            let rule = error.details?["rule"]?.stringValue.flatMap(DownloadRule.init(rawValue:)) ?? .account
            let counts = error.details?["counts"].flatMap { try? JSONDecoder().decode(DownloadCounts.self, from: JSONEncoder().encode($0)) }
            _ = try? eventLogger.log(.downloadLimitReached(Self.limitType(rule), assetId: assetId))
            broadcaster.emit(.downloadDenied(assetId: assetId, rule: rule, counts: counts, permanent: rule.isPermanent))
            let failure = DownloadFailure(.permissionDenied, error.message)
            if rule.isPermanent {
                failed(assetId, failure, forGood: true)
            } else {
                _ = try? local.updateDownload(assetId: assetId) { $0.lastFailure = failure }
                erroredThisPass.insert(assetId)
            }
        } catch let error as BackplaneClientError where error.code == .downloadNotEnabled {
            // The backplane turned download off since the last sync: the next sync says so.
            _ = try? local.updateDownload(assetId: assetId) { $0.lastFailure = DownloadFailure(.permissionDenied, error.message) }
            erroredThisPass.insert(assetId)
        } catch {
            // No answer (offline, the engine stopping): asked again at the next pass.
            erroredThisPass.insert(assetId)
        }
        return false
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
