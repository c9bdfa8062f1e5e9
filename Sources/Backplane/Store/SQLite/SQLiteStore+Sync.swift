import Foundation
import GRDB
import BackplaneWire

/// A device's sync in one store call (`SyncStore`).
extension SQLiteStore {
    public func sync(_ plan: SyncPlan, spending nonce: SignedRequestRecord?) async throws -> SyncDecision {
        if let quiet = try await quietSync(plan, spending: nonce) { return quiet }
        return try await write(spending: nonce) { db in
            guard let device = try Self.device(db, applicationId: plan.applicationId, deviceId: plan.deviceId) else {
                throw StoreError.unknownDevice(plan.deviceId)
            }
            let snapshot = SyncSnapshot(
                device: device,
                reportedGrants: try Self.grants(db, applicationId: plan.applicationId, grantIds: plan.reportedGrantIds),
                ackedCommands: try Self.commands(db, applicationId: plan.applicationId, commandIds: plan.ackedCommandIds),
                openCommands: try Self.openCommands(db, applicationId: plan.applicationId, deviceId: plan.deviceId))
            let decision = plan.decide(snapshot)
            for grant in decision.grants { try grant.update(db) }
            for command in decision.commands { try CommandRecord.update(db, command) }
            for release in decision.releases {
                try Self.releaseGrants(db, applicationId: plan.applicationId, deviceId: plan.deviceId, assetIds: release.assetIds, at: decision.releasedAt)
            }
            if let changed = decision.device { try changed.update(db) }
            return decision
        }
    }

    private static func grants(_ db: Database, applicationId: String, grantIds: [String]) throws -> [String: DownloadGrantRecord] {
        guard !grantIds.isEmpty else { return [:] }
        let found = try DownloadGrantRecord.filter { $0.applicationId == applicationId && grantIds.contains($0.grantId) }.fetchAll(db)
        return Dictionary(found.map { ($0.grantId, $0) }, uniquingKeysWith: { first, _ in first })
    }

    private static func commands(_ db: Database, applicationId: String, commandIds: [String]) throws -> [String: CommandRecord] {
        var found: [String: CommandRecord] = [:]
        for id in Set(commandIds) {
            if let command = try command(db, applicationId: applicationId, commandId: id) { found[id] = command }
        }
        return found
    }
}
