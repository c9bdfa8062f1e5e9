import Foundation
import BackplaneWire

/// `POST /v1/sync`: one store call (`SyncStore.sync`) reads what the sync needs, applies the
/// rules (`SyncRules`: the download reports, the acks, the delivery of what is open, the reported
/// versions), writes what changed and spends the request's nonce, all in one transaction; a
/// sync that changes nothing is a read. Then the device is noted as seen, and the answer shows it.
public struct SyncService: Sendable {
    let store: any BackplaneStore
    let devices: DeviceService
    let commands: CommandService
    let lastSeen: LastSeenLog
    /// Renews or ends the licenses a sync reports (after the sync's own transaction).
    let licenses: LicenseService?
    let now: @Sendable () -> Date

    /// A device's signed sync: its nonce is spent by the sync's own transaction.
    func sync(_ signed: SignedRequest, _ request: SyncRequest) async throws -> SyncResponse {
        try await sync(
            applicationId: signed.device.applicationId, deviceId: signed.device.deviceId, request,
            signedIn: SyncSnapshot(device: signed.record, openCommands: signed.openCommands), nonce: signed.nonce)
    }

    /// A sync without a signed request (tests and tools that act as the device).
    public func sync(applicationId: String, deviceId: String, _ request: SyncRequest) async throws -> SyncResponse {
        try await sync(applicationId: applicationId, deviceId: deviceId, request, signedIn: nil, nonce: nil)
    }

    private func sync(
        applicationId: String, deviceId: String, _ request: SyncRequest, signedIn: SyncSnapshot?, nonce: SignedRequestRecord?
    ) async throws -> SyncResponse {
        let reports = request.downloadReports ?? [], acks = request.acks ?? []
        try Self.validate(request, reports: reports, acks: acks)
        let rules = SyncRules(
            deviceId: deviceId, now: now(), reports: reports, acks: acks,
            versions: .init(sdkVersion: request.sdkVersion, appVersion: request.appVersion, osVersion: request.osVersion),
            support: commands.support)
        let plan = SyncPlan(
            applicationId: applicationId, deviceId: deviceId, signedIn: signedIn, reportedGrantIds: reports.map(\.grantId),
            ackedCommandIds: acks.map(\.commandId), decide: rules.decide)
        let decision: SyncDecision
        do {
            decision = try await answeringNonceRefusals { try await store.sync(plan, spending: nonce) }
        } catch StoreError.unknownDevice {
            throw ServiceError.notFound("No device '\(deviceId)'.")
        }
        commands.countTransitions(acks: acks, results: decision.ackResults, open: decision.openCommands, now: rules.now)
        // Accepted now: noted as seen before the answer, which shows it.
        if nonce != nil { lastSeen.saw(applicationId: applicationId, deviceId: deviceId, at: now()) }
        let device = try await devices.response(applicationId, decision.deviceAfter, includePushToken: true)
        // Only a sync that reports licenses pays for their renewal.
        var renewals: [LicenseRenewal]?
        if let held = request.licenses, !held.isEmpty, let licenses {
            renewals = try await licenses.renew(applicationId: applicationId, deviceId: deviceId, held)
        }
        return SyncResponse(
            device: device.device, settings: device.settings, serverTime: device.serverTime, commands: decision.openCommands.map(\.wire),
            ackResults: decision.ackResults, downloadReportResults: decision.reportResults, licenseRenewals: renewals)
    }

    private static func validate(_ request: SyncRequest, reports: [DownloadReport], acks: [CommandAck]) throws {
        guard reports.count <= WireLimits.maxDownloadReportsPerSync else {
            throw ServiceError.validation("At most \(WireLimits.maxDownloadReportsPerSync) download reports per sync.", field: "downloadReports")
        }
        for report in reports { try Validate.identifier(report.grantId, field: "downloadReports.grantId") }
        guard acks.count <= WireLimits.maxAcksPerSync else {
            throw ServiceError.validation("At most \(WireLimits.maxAcksPerSync) acknowledgements per sync.", field: "acks")
        }
        for ack in acks {
            try Validate.identifier(ack.commandId, field: "acks.commandId")
            try Validate.optionalText(ack.reason, field: "acks.reason", maxLength: WireLimits.maxReasonLength)
        }
        try Validate.optionalText(request.sdkVersion, field: "sdkVersion", maxLength: WireLimits.maxShortTextLength)
        try Validate.optionalText(request.appVersion, field: "appVersion", maxLength: WireLimits.maxShortTextLength)
        try Validate.optionalText(request.osVersion, field: "osVersion", maxLength: WireLimits.maxShortTextLength)
        guard (request.licenses?.count ?? 0) <= WireLimits.maxLicensesPerSync else {
            throw ServiceError.validation("At most \(WireLimits.maxLicensesPerSync) licenses per sync.", field: "licenses")
        }
        for license in request.licenses ?? [] {
            try Validate.identifier(license.licenseId, field: "licenses.licenseId")
            try Validate.date(license.firstPlayedAt, field: "licenses.firstPlayedAt")
        }
    }
}
