import Foundation
import PostgresNIO
import BackplaneWire

/// A device's sync in one store call (`SyncStore`).
extension PostgresStore {
    public func sync(_ plan: SyncPlan, spending nonce: SignedRequestRecord?) async throws -> SyncDecision {
        if let quiet = try await quietSync(plan, spending: nonce) { return quiet }
        return try await transaction { [logger] connection in
            // First, as every transaction that may change the device row or its grants does: one lock order.
            try await Self.lockDevice(connection, applicationId: plan.applicationId, deviceId: plan.deviceId, logger: logger)
            if let nonce, try await !Self.record(connection, nonce, logger: logger) { throw NonceReusedError() }
            guard let device = try await Self.device(connection, applicationId: plan.applicationId, deviceId: plan.deviceId, logger: logger) else {
                throw StoreError.unknownDevice(plan.deviceId)
            }
            let grants = plan.reportedGrantIds.isEmpty ? [] : try await connection.rows("""
                SELECT \(unescaped: PostgresColumns.grant) FROM download_grants
                WHERE application_id = \(plan.applicationId) AND grant_id = ANY(\(plan.reportedGrantIds)) ORDER BY grant_id FOR UPDATE
                """, logger: logger).records(DownloadGrantRecord.init)
            // The acknowledged commands and the open ones, locked in one statement
            // (`LockedCommands`): read again after any wait, so one another node finished
            // meanwhile is read finished, and no longer open.
            let commands = try await connection.prepared(
                PreparedStatements.LockedCommands(applicationId: plan.applicationId, commandIds: plan.ackedCommandIds, deviceId: plan.deviceId),
                logger: logger)
            let ackedIds = Set(plan.ackedCommandIds)
            let snapshot = SyncSnapshot(
                device: device,
                reportedGrants: Dictionary(grants.map { ($0.grantId, $0) }, uniquingKeysWith: { first, _ in first }),
                ackedCommands: Dictionary(
                    commands.filter { ackedIds.contains($0.commandId) }.map { ($0.commandId, $0) }, uniquingKeysWith: { first, _ in first }),
                openCommands: commands.filter { $0.deviceId == plan.deviceId && !$0.state.isFinished })
            let decision = plan.decide(snapshot)
            for grant in decision.grants { try await Self.updateState(connection, grant, logger: logger) }
            for command in decision.commands { try await Self.update(connection, command, logger: logger) }
            for release in decision.releases {
                try await Self.releaseGrants(
                    connection, applicationId: plan.applicationId, deviceId: plan.deviceId, assetIds: release.assetIds, at: decision.releasedAt,
                    logger: logger)
            }
            if let changed = decision.device { try await Self.update(connection, changed, logger: logger) }
            return decision
        }
    }
}
