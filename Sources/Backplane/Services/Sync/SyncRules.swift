import Foundation
import BackplaneWire

/// The rules of one sync, written once above the stores: a pure function from what the store
/// read (`SyncSnapshot`) to what it writes and what the sync answers (`SyncDecision`). In order:
/// the download reports (so a wipe acknowledged in the same sync finds them recorded), the acks
/// (which may take the device out), the delivery of what is still open, and the versions the
/// device reports, so the answer shows the device as it is after all of them.
struct SyncRules: Sendable {
    let deviceId: String
    let now: Date
    let reports: [DownloadReport]
    let acks: [CommandAck]
    let versions: ReportedVersions
    let support: CommandSupport

    /// What a device reports of itself with each sync; nil leaves a version as it is.
    struct ReportedVersions: Sendable {
        var sdkVersion: String?
        var appVersion: String?
        var osVersion: String?
    }

    func decide(_ snapshot: SyncSnapshot) -> SyncDecision {
        var decision = SyncDecision(deviceAfter: snapshot.device, releasedAt: now)

        var grants = snapshot.reportedGrants
        var changedGrants: [String] = []
        for report in reports {
            let (updated, result) = DownloadGrantService.apply(report, to: grants[report.grantId], from: deviceId, now: now)
            if let updated, updated != grants[report.grantId] {
                grants[report.grantId] = updated
                if !changedGrants.contains(report.grantId) { changedGrants.append(report.grantId) }
            }
            decision.reportResults.append(result)
        }
        decision.grants = changedGrants.compactMap { grants[$0] }

        // The commands as they stand while the sync goes on, by id: those read, as they change.
        var commands = snapshot.ackedCommands
        for command in snapshot.openCommands { commands[command.commandId] = command }
        var changedCommands: [String] = []
        func store(_ command: CommandRecord) {
            guard command != commands[command.commandId] else { return }
            commands[command.commandId] = command
            if !changedCommands.contains(command.commandId) { changedCommands.append(command.commandId) }
        }
        var device = snapshot.device
        for ack in acks {
            let outcome = Self.apply(ack, to: commands[ack.commandId], from: deviceId, now: now)
            if let updated = outcome.updated { store(updated) }
            if let release = outcome.releasesGrants { decision.releases.append(release) }
            if outcome.detachesDevice {
                let detached = DeviceService.detached(device, at: now)
                device = detached.device
                if let release = detached.releases { decision.releases.append(release) }
            }
            decision.ackResults.append(outcome.result)
        }
        // Delivered to the SDK the device reports in this very sync (it may have just updated).
        let sdkVersion = versions.sdkVersion ?? device.sdkVersion
        for read in snapshot.openCommands {
            guard let current = commands[read.commandId], !current.state.isFinished else { continue }
            let delivered = Self.deliver(support.refusing(current, onSDK: sdkVersion, now: now), now: now)
            store(delivered)
            if !delivered.state.isFinished { decision.openCommands.append(delivered) }
        }
        decision.commands = changedCommands.compactMap { commands[$0] }

        let reported = versions.applied(to: device, at: now)
        decision.deviceAfter = reported
        if reported != snapshot.device { decision.device = reported }
        return decision
    }

    /// What an acknowledgement does to the command it names.
    struct AckOutcome: Sendable {
        /// The command to store in place of the one read, if it changes.
        var updated: CommandRecord?
        var result: CommandAckResult
        /// The acknowledged command takes the device out (kill, unregister).
        var detachesDevice: Bool
        /// The acknowledged command deleted downloads (wipe, delete assets): their grants end as `released`.
        var releasesGrants: GrantRelease? = nil
    }

    /// An open command about to be sent: delivered, or expired.
    static func deliver(_ command: CommandRecord, now: Date) -> CommandRecord {
        var command = CommandExpiry.applied(to: command, now: now)
        if command.state == .pending {
            command.state = .delivered
            command.deliveredAt = now
            command.updatedAt = now
        }
        return command
    }

    /// The acknowledgement state machine. A repeated ack of a finished command changes nothing.
    static func apply(_ ack: CommandAck, to command: CommandRecord?, from deviceId: String, now: Date) -> AckOutcome {
        guard let command, command.deviceId == deviceId else {
            return .init(updated: nil, result: .init(commandId: ack.commandId, status: .rejected, message: "No such command for this device."), detachesDevice: false)
        }
        let current = CommandExpiry.applied(to: command, now: now)
        guard !current.state.isFinished else {
            return .init(updated: current, result: .init(commandId: ack.commandId, status: .duplicate, message: "The command is \(current.state.rawValue)."), detachesDevice: false)
        }
        var updated = current
        updated.updatedAt = now
        switch ack.outcome {
        case .succeeded:
            updated.state = .succeeded
            updated.completedAt = now
        case .failed:
            updated.state = .failed
            updated.completedAt = now
            updated.failureReason = ack.reason ?? "unspecified"
        case .deferred:
            updated.deferrals += 1
            updated.failureReason = ack.reason
        default:  // (the request's decoder refuses any other outcome)
            return .init(updated: nil, result: .init(commandId: ack.commandId, status: .rejected, message: "Unknown outcome."), detachesDevice: false)
        }
        let succeeded = updated.state == .succeeded
        let detaches = succeeded && (command.type == .kill || command.type == .unregister)
        // A wipe or a deletion removed the downloads: their grants hold nothing any more.
        let releases: GrantRelease? = switch command.type {
        case .wipe where succeeded, .kill where succeeded: .all
        case .deleteAssets where succeeded: .assets(command.assetIds ?? [])
        default: nil
        }
        return .init(
            updated: updated, result: .init(commandId: ack.commandId, status: .accepted), detachesDevice: detaches, releasesGrants: releases)
    }

}

extension SyncRules.ReportedVersions {
    /// The device with these versions; `updatedAt` moves only when one changed.
    func applied(to original: DeviceRecord, at now: Date) -> DeviceRecord {
        var device = original
        device.sdkVersion = sdkVersion ?? device.sdkVersion
        device.appVersion = appVersion ?? device.appVersion
        device.osVersion = osVersion ?? device.osVersion
        if device != original { device.updatedAt = now }
        return device
    }
}
