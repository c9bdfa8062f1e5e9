import Foundation
import BackplaneWire

// Remote commands (wipe, delete, kill, unregister) and the downloaded content they act on.
extension BackplaneEngine {
    // MARK: remote commands

    /// Runs each command not run before and stores its outcome for the next sync to acknowledge.
    /// The outcome is stored after the effect: a crash in between runs the command again on the
    /// next start, which is harmless because every effect is idempotent (deleting what is gone).
    func execute(_ commands: [Command]) throws {
        guard let content else { return }
        for command in commands where state == .running {
            guard try storage({ try !$0.hasOutcome(commandId: command.commandId) }) else { continue }
            var outcome = CommandAck(commandId: command.commandId, outcome: .succeeded)
            do {
                switch command.type {
                case .wipe:
                    try wipe(content)
                case .deleteAssets:
                    let deleted = try content.delete(command.assetIds ?? [])
                    for assetId in deleted { _ = try? eventLogger.log(.assetDeleted(assetId: assetId, reason: .remote)) }
                    broadcaster.emit(.assetsDeleted(assetIds: deleted, reason: .remote))
                case .kill:
                    broadcaster.emit(.startingRemoteKill)
                    try wipe(content)
                case .unregister, .syncNow:
                    // Unregistering takes effect when the backplane has the acknowledgement; a
                    // syncNow is done by the sync that acknowledges it.
                    break
                }
            } catch {
                outcome = CommandAck(commandId: command.commandId, outcome: .failed, reason: "\(error)".prefix(utf8Bytes: WireLimits.maxReasonLength))
            }
            try storage { try $0.recordOutcome(LocalStore.Outcome(ack: outcome, type: command.type)) }
        }
    }

    /// Deletes every download and logs it: each asset deleted (reason deleteAll), then the reset.
    func wipe(_ content: ContentStore) throws {
        let deleted = try content.delete(nil)
        for assetId in deleted { _ = try? eventLogger.log(.assetDeleted(assetId: assetId, reason: .deleteAll)) }
        _ = try? eventLogger.log(.reset(.remoteWipe))
        broadcaster.emit(.remoteWipe(deletedAssetIds: deleted))
    }

    /// The backplane has the acknowledgement of a kill or unregister: the device is out.
    func finish(_ type: CommandType) throws {
        try becomeUnregistered()
        if type == .kill { broadcaster.emit(.remoteKill) }
    }

    func storage<Value>(_ body: (LocalStore) throws -> Value) throws -> Value {
        guard let local else { throw BackplaneClientError(kind: .notRunning, message: "The engine is not started.") }
        do {
            return try body(local)
        } catch {
            throw BackplaneClientError(kind: .localStorage, message: "Could not use the SDK database.", underlying: error)
        }
    }

    // MARK: downloaded content

    /// Puts a file in place as the downloaded content of `assetId` (copied into the SDK's content
    /// directory) and records it. The download engine will do this itself; until then apps and
    /// the harness use it.
    @discardableResult
    public func addDownloadedAsset(assetId: String, copying file: URL) throws -> LocalAsset {
        try loadLocalState()
        guard let content else { throw BackplaneClientError(kind: .notRunning, message: "The engine is not started.") }
        do {
            return try content.add(assetId: assetId, copying: file)
        } catch {
            throw BackplaneClientError(kind: .localStorage, message: "Could not add \(file.path) as asset \(assetId).", underlying: error)
        }
    }

    /// The downloaded assets the SDK holds.
    public func downloadedAssets() throws -> [LocalAsset] {
        try loadLocalState()
        return try storage { try $0.assets() }
    }

    /// Where an asset's file is.
    public func fileURL(of asset: LocalAsset) -> URL? {
        content?.url(of: asset)
    }
}
