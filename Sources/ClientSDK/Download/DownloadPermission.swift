import Foundation
import BackplaneWire

/// Asks the backplane whether an asset may be downloaded (`POST /v1/download-grants`) and says
/// what the answer means for the queue (`Outcome`). It records what the answer says of the asset
/// (its grant, or its denial) and tells the app, but keeps no state of the queue's: the
/// scheduler (`DownloadRunner`) applies the outcome.
struct DownloadPermission: Sendable {
    let database: SDKDatabase
    let options: DownloadOptions
    let snapshot: DeviceSnapshot
    let events: EngineEvents
    /// One `POST /v1/download-grants`.
    let askBackplane: @Sendable (DownloadPermissionRequest) async throws -> DownloadPermissionResponse
    /// Asks the engine for a sync now (the backplane refused for a reason the last sync did not say).
    let requestSync: @Sendable () -> Void

    enum Outcome: Sendable {
        /// The download may start; the grant is recorded with its window.
        case granted(DownloadGrant)
        /// Not in this pass. `deniedByRule`: a rule that can change denied it, and a sync (which
        /// tells the backplane of what frees places) is worth asking again after.
        case later(deniedByRule: Bool)
        /// No answer (offline, a 5xx, a 429): no asset without a grant is asked for again in
        /// this pass. Asking for the next at once would get the same answer, and a 429 for each
        /// would keep the device's bucket empty, so that its syncs are refused too.
        case noAnswer
        /// Denied for good (a lifetime limit).
        case deniedForGood(DownloadFailure)
        /// The asset left the queue while the backplane answered.
        case notQueued
    }

    /// Whether the backplane must be asked before a download starts: when the application sets
    /// a download limit, or always if the app says so.
    func isNeeded() -> Bool {
        if options.askPermission == .always { return true }
        guard let settings = snapshot.current?.settings else { return true }
        return [settings.maxDownloadsPerDevice, settings.maxDownloadsPerAccount, settings.maxLifetimeDownloadsPerAsset,
                settings.maxCopiesPerAccount].contains { $0 >= 0 }
    }

    /// Asks for a queued asset, as its download is about to start.
    func ask(for queued: QueuedDownload) async -> Outcome {
        let assetId = queued.assetId
        do {
            guard let grant = try await ask(for: queued.request) else { return .later(deniedByRule: false) }
            return try database.recordGrant(grant.grantId, window: grant.window, forDownload: assetId) ? .granted(grant) : .notQueued
        } catch let error as BackplaneClientError where error.code == .downloadLimitReached {
            let denial = Self.denial(from: error)
            let failure = DownloadFailure(.permissionDenied, error.message)
            _ = try? database.updateDownload(assetId: assetId) { download in
                download.lastFailure = failure
                download.denial = denial
            }
            // Stored first: whoever hears of it finds the asset as it now is.
            announce(denial, assetId: assetId)
            return denial.permanent ? .deniedForGood(failure) : .later(deniedByRule: true)
        } catch let error as BackplaneClientError where error.code == .downloadNotEnabled {
            // The backplane turned download off since the last sync: a sync now says so, and
            // the queue blocks until it is on again.
            _ = try? database.updateDownload(assetId: assetId) { $0.lastFailure = DownloadFailure(.permissionDenied, error.message) }
            requestSync()
            return .later(deniedByRule: false)
        } catch let error as BackplaneClientError where error.isTransient {
            return .noAnswer
        } catch {
            // Refused for this asset alone, or the engine stopping: asked again at the next pass.
            return .later(deniedByRule: false)
        }
    }

    /// `PermissionTiming.atQueueTime`: asks before the asset is queued. A denial, or download
    /// turned off, is thrown (nothing is queued); no answer returns nil, and the asset is asked
    /// for again when its download starts.
    func askAtQueueTime(for request: DownloadRequest) async throws -> DownloadGrant? {
        do {
            return try await ask(for: request)
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

    /// A fresh entitlement for a grant the device holds (for the license provider); nil offline.
    func freshEntitlement(assetId: String, grantId: String) async -> String? {
        await LicenseRequest.freshEntitlement(assetId: assetId, grantId: grantId, ask: askBackplane)
    }

    /// One `POST /v1/download-grants`; nil for a grant the SDK cannot keep (another asset's, or
    /// an id the backplane would refuse in a report, which would stop every later sync).
    private func ask(for request: DownloadRequest) async throws -> DownloadGrant? {
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
        // A rule of a later backplane has no limit type this SDK could log; the app still hears.
        if let limit = Self.limitType(denial.rule) { events.log(.downloadLimitReached(limit, assetId: assetId)) }
        events.tellApp(.downloadDenied(assetId: assetId, rule: denial.rule, counts: denial.counts, permanent: denial.permanent))
    }

    private static func limitType(_ rule: DownloadRule) -> DownloadLimitType? {
        switch rule {
        case .assetLifetime: .asset
        case .account: .account
        case .copies: .copies
        case .device: .device
        default: nil
        }
    }
}
