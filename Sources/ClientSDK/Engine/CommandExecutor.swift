import Foundation
import BackplaneWire

/// Runs remote commands (wipe, delete assets, kill; unregister and syncNow take effect elsewhere)
/// on the downloaded content and stores each outcome for the next sync to acknowledge.
struct CommandExecutor: Sendable {
    let database: SDKDatabase
    let content: ContentStore
    let downloads: DownloadRunner
    let events: EngineEvents
    let lifecycle: EngineLifecycle

    /// Runs each command not run before, while the engine runs. The outcome is stored after the
    /// effect: a crash in between runs the command again on the next start, which is harmless
    /// because every effect is idempotent (deleting what is gone).
    func execute(_ commands: [Command]) async throws {
        for command in commands where lifecycle.isRunning {
            guard try database.access({ try !$0.hasOutcome(commandId: command.commandId) }) else { continue }
            var outcome = CommandAck(commandId: command.commandId, outcome: .succeeded)
            do {
                switch command.type {
                case .wipe:
                    try await wipe()
                case .deleteAssets:
                    // A download of a listed asset stops and leaves the queue with its files.
                    let removal = try await downloads.remove(.assets(command.assetIds ?? []), reason: .remote)
                    events.tellApp(.assetsDeleted(assetIds: removal.deleted + removal.dequeued, reason: .remote))
                case .kill:
                    events.tellApp(.startingRemoteKill)
                    try await wipe()
                case .unregister, .syncNow:
                    // Unregistering takes effect when the backplane has the acknowledgement; a
                    // syncNow is done by the sync that acknowledges it.
                    break
                default:
                    // A type a later backplane added: said so, and the rest of the sync goes on.
                    outcome = CommandAck(commandId: command.commandId, outcome: .failed, reason: Self.unsupported)
                }
            } catch {
                outcome = CommandAck(commandId: command.commandId, outcome: .failed, reason: "\(error)".prefix(utf8Bytes: WireLimits.maxReasonLength))
            }
            try database.access { try $0.recordOutcome(SDKDatabase.Outcome(ack: outcome, type: command.type)) }
        }
    }

    /// The reason acknowledged for a command type this SDK does not know (added to the backplane
    /// after it shipped): the command fails on this device and the admin sees why.
    static let unsupported = "unsupported"

    /// Stops the download under way, empties the queue, deletes every downloaded asset (each
    /// logged with reason deleteAll), then logs the reset.
    private func wipe() async throws {
        let removal = try await downloads.remove(.everything, reason: .deleteAll)
        events.record(.reset(.remoteWipe), tellingApp: .remoteWipe(deletedAssetIds: removal.deleted))
    }
}
