import Foundation
import BackplaneWire

/// Download permissions: the backplane decides whether a device may download an asset, under
/// the application's limits, and records the grant in the same transaction as the counts it
/// checked. Devices report what became of each grant in their syncs.
public struct DownloadGrantService: Sendable {
    let store: any BackplaneStore
    let entitlements: Entitlements
    let commands: CommandService
    let now: @Sendable () -> Date

    public init(
        store: any BackplaneStore, entitlements: Entitlements, commands: CommandService, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store
        self.entitlements = entitlements
        self.commands = commands
        self.now = now
    }

    /// What a permission request came to.
    enum Outcome: Sendable {
        case granted(DownloadGrantRecord, DownloadCounts, created: Bool)
        case denied(DownloadRule, DownloadCounts)
        case notEnabled
        /// A renewal of a grant the device no longer holds.
        case ended(grantId: String)
    }

    /// Grants `request.assetId` to the device, or refuses with 409: `download_not_enabled` (also
    /// for a grant the device holds: no token is issued while download is off), or
    /// `download_limit_reached` naming the first rule at its limit (lifetime, account, copies,
    /// device) with every count. A device that holds a grant of the asset gets that grant again,
    /// with a new entitlement (asking twice is safe and counts once).
    public func requestPermission(
        applicationId: String, deviceId: String, _ request: DownloadPermissionRequest
    ) async throws -> (DownloadPermissionResponse, created: Bool) {
        try Validate.identifier(request.assetId, field: "assetId")
        if let grantId = request.grantId { try Validate.identifier(grantId, field: "grantId") }
        if let limit = request.maxLifetimeDownloads, !(0...Self.maxLimit).contains(limit) {
            throw ServiceError.validation("'maxLifetimeDownloads' must be 0 to \(Self.maxLimit).", field: "maxLifetimeDownloads")
        }
        let now = now()
        let outcome = try await store.grantDownload(applicationId: applicationId, deviceId: deviceId, assetId: request.assetId) { state in
            let decision = Self.decide(request, state, now: now)
            if case .granted(let grant, _, true) = decision { return (grant, decision) }
            return (nil, decision)
        }
        switch outcome {
        case .granted(let grant, let counts, let created):
            let entitlement = try await entitlements.tokens(for: [grant]).first ?? nil
            return (DownloadPermissionResponse(grant: Self.wire(grant, entitlement: entitlement), counts: counts), created)
        case .denied(let rule, let counts):
            throw ServiceError.downloadLimitReached(rule: rule, counts: counts)
        case .ended(let grantId):
            throw ServiceError.conflict("Grant '\(grantId)' of asset '\(request.assetId)' is not held by this device; ask without a grantId.")
        case .notEnabled:
            throw ServiceError(
.downloadNotEnabled, "Device '\(deviceId)' is not download-enabled; enable it (within the device limit) first.")
        }
    }

    static let maxLimit = DownloadPermissionRequest.maxLifetimeDownloadsLimit

    /// The rules, in order, on counts read in the transaction that records the grant.
    static func decide(_ request: DownloadPermissionRequest, _ state: DownloadPermissionState, now: Date) -> Outcome {
        guard state.device.isRegistered, state.device.downloadEnabled else { return .notEnabled }
        let settings = state.settings
        // An admin's policy replaces the application's limit for the asset; the episode's (the
        // CMS's) and the request's can only tighten it: lifting the one permanent rule is an admin's.
        let assetLimit = state.policy?.maxLifetimeDownloads ?? settings.maxLifetimeDownloadsPerAsset
        let lifetimeLimit = [assetLimit, state.episode?.maxLifetimeDownloads ?? -1, request.maxLifetimeDownloads ?? -1]
            .filter { $0 >= 0 }.min() ?? -1
        var counts = DownloadCounts(
            assetLifetime: .init(used: state.lifetime, limit: lifetimeLimit),
            account: .init(used: state.accountHeld, limit: settings.maxDownloadsPerAccount),
            copies: .init(used: state.copiesHeld, limit: settings.maxCopiesPerAccount),
            device: .init(used: state.deviceHeld, limit: settings.maxDownloadsPerDevice))
        if let wanted = request.grantId, state.held?.grantId != wanted { return .ended(grantId: wanted) }
        if let held = state.held { return .granted(held, counts, created: false) }
        if let rule = DownloadRule.allCases.first(where: { counts[$0].isFull }) { return .denied(rule, counts) }
        counts.assetLifetime.used += 1
        counts.account.used += 1
        counts.copies.used += 1
        counts.device.used += 1
        let grant = DownloadGrantRecord(
            rowId: nil, grantId: Secrets.grantId(), applicationId: state.device.applicationId, userId: state.device.userId,
            deviceId: state.device.deviceId, assetId: request.assetId, state: .active, countsForLifetime: true,
            window: DownloadWindow(
                settings: settings, asset: state.policy.map { $0.availability.over(state.episode?.availability) } ?? state.episode?.availability),
            grantedAt: now, updatedAt: now)
        return .granted(grant, counts, created: true)
    }

    /// The grant's state machine: active → completed | failed | deleted, completed → deleted.
    /// A report that repeats where the grant is (or is past) changes nothing and says so.
    static func apply(
        _ report: DownloadReport, to grant: DownloadGrantRecord?, from deviceId: String, now: Date
    ) -> (DownloadGrantRecord?, DownloadReportResult) {
        guard let grant, grant.deviceId == deviceId else {
            return (nil, .init(grantId: report.grantId, status: .rejected, message: "No such grant for this device."))
        }
        let target: DownloadGrantState
        switch report.outcome {
        case .completed: target = .completed
        case .failed: target = .failed
        case .deleted: target = .deleted
        default:  // (the request's decoder refuses any other outcome)
            return (nil, .init(grantId: report.grantId, status: .rejected, message: "Unknown outcome '\(report.outcome)'."))
        }
        switch (grant.state, target) {
        case (.active, _), (.completed, .deleted):
            var updated = grant
            updated.state = target
            updated.updatedAt = now
            // A failed download stays in the lifetime count: otherwise "ask, report failed, ask"
            // would be a way around the one permanent rule.
            return (updated, .init(grantId: grant.grantId, status: .accepted, state: target))
        case (let state, _) where state == target || state == .released:
            return (nil, .init(grantId: grant.grantId, status: .duplicate, state: state, message: "The grant is \(state.rawValue)."))
        default:
            return (nil, .init(
                grantId: grant.grantId, status: .rejected, state: grant.state,
                message: "A \(grant.state.rawValue) grant cannot become \(target.rawValue)."))
        }
    }

    // MARK: admin

    public func list(applicationId: String, userId: String?, deviceId: String?, cursor: String?, limit: Int?) async throws -> DownloadGrantPage {
        let limit = try Validate.pageLimit(limit, default: WireLimits.defaultPageSize, max: WireLimits.maxPageSize)
        try Validate.optionalText(userId, field: "userId", maxLength: WireLimits.maxIdentifierLength)
        try Validate.optionalText(deviceId, field: "deviceId", maxLength: WireLimits.maxIdentifierLength)
        let before = try cursor.map(RowIdCursor.grant.decode)
        // One extra row tells whether another page exists.
        let rows = try await store.downloadGrants(
            applicationId: applicationId, userId: userId, deviceId: deviceId, beforeRowId: before, limit: limit + 1)
        let page = Array(rows.prefix(limit))
        let tokens = try await entitlements.tokens(for: page)
        return DownloadGrantPage(
            grants: zip(page, tokens).map { Self.wire($0, entitlement: $1) },
            nextCursor: rows.count > limit ? page.last?.rowId.map(RowIdCursor.grant.encode) : nil)
    }

    public func resetLifetime(applicationId: String, _ request: LifetimeResetRequest) async throws -> LifetimeResetResponse {
        try Validate.identifier(request.userId, field: "userId")
        try Validate.identifier(request.assetId, field: "assetId")
        guard let reset = try await store.resetLifetimeDownloads(
            applicationId: applicationId, userId: request.userId, assetId: request.assetId, at: now())
        else {
            throw ServiceError.notFound("User '\(request.userId)' was never granted asset '\(request.assetId)'.")
        }
        return LifetimeResetResponse(userId: request.userId, assetId: request.assetId, resetGrants: reset)
    }

    /// Revokes a grant that holds a download: the device is told to delete the asset, through
    /// the command queue (so it happens once, survives restarts on both sides and is
    /// acknowledged), and the acknowledgement releases the grant. 404 for an unknown grant, 409
    /// for one that has ended.
    public func revoke(applicationId: String, grantId: String) async throws -> RevokedGrant {
        try Validate.identifier(grantId, field: "grantId")
        guard let grant = try await store.downloadGrant(applicationId: applicationId, grantId: grantId) else {
            throw ServiceError.notFound("No download grant '\(grantId)'.")
        }
        guard grant.state.holdsDownload else {
            throw ServiceError.conflict("The grant is \(grant.state.rawValue); there is nothing to revoke.")
        }
        let enqueued = try await commands.enqueue(
            applicationId: applicationId, EnqueueCommandRequest(type: .deleteAssets, deviceId: grant.deviceId, assetIds: [grant.assetId]))
        guard let command = enqueued.commands.first else {
            throw ServiceError.conflict("Device '\(grant.deviceId)' is no longer registered.")
        }
        let entitlement = try await entitlements.tokens(for: [grant]).first ?? nil
        return RevokedGrant(grant: Self.wire(grant, entitlement: entitlement), command: command)
    }

    static func wire(_ grant: DownloadGrantRecord, entitlement: String?) -> DownloadGrant {
        DownloadGrant(
            grantId: grant.grantId, assetId: grant.assetId, deviceId: grant.deviceId, userId: grant.userId, state: grant.state,
            grantedAt: grant.grantedAt, updatedAt: grant.updatedAt, window: grant.window, entitlement: entitlement)
    }
}

extension ServiceError {
    static func downloadLimitReached(rule: DownloadRule, counts: DownloadCounts) -> Self {
        let count = counts[rule]
        func object(_ count: DownloadCount) -> JSONValue { .object(["used": .int(Int64(count.used)), "limit": .int(Int64(count.limit))]) }
        return .init(
            .downloadLimitReached,
            "The \(rule.rawValue) limit is reached: \(count.used) of \(count.limit).",
            details: [
                "rule": .string(rule.rawValue),
                "permanent": .bool(rule.isPermanent),
                "counts": .object(Dictionary(uniqueKeysWithValues: DownloadRule.allCases.map { ($0.rawValue, object(counts[$0])) })),
            ])
    }
}
