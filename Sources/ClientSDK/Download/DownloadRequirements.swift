import Foundation

/// What must hold for the queue to run, as Media3's `Requirements`: the app's switch, the
/// backplane's download-enabled flag, the network (`downloadOverCellular`), the device's
/// conditions (`DownloadConditions`: charger, battery, unmetered network), the asset limits
/// and the storage rules (`maxStorage`, `headroom`). It reads the SDK database, the last sync
/// and the volume, and holds no state: the scheduler (`DownloadRunner`) keeps what it learned
/// (the room when the head of the queue did not fit) and passes it in.
struct DownloadRequirements: Sendable {
    let database: SDKDatabase
    let content: ContentStore
    let options: DownloadOptions
    let snapshot: DeviceSnapshot

    /// The rule that keeps the queue from running now, if any. `roomWhenStorageRanOut`: the room
    /// the storage rules left when the asset at the head ran out of it; it waits for more.
    func block(roomWhenStorageRanOut: Int64?) -> DownloadBlock? {
        if (try? database.load(Bool.self, .downloadsSwitchedOff)) ?? false == true { return .switchedOff }
        guard let lastSync = snapshot.current, lastSync.device.downloadEnabled else { return .deviceNotDownloadEnabled }
        if let reason = deviceBlock() { return reason }
        let completed = (try? database.assets().count) ?? 0
        if completed >= options.maxDownloadedAssets { return .maxDownloadedAssets }
        let perDevice = lastSync.settings.maxDownloadsPerDevice
        if perDevice >= 0, completed >= perDevice { return .maxDownloadsPerDevice }
        let room = storageRoom(assetBytes: 0)
        if room <= 0 { return .storage }
        if let roomWhenStorageRanOut, room <= roomWhenStorageRanOut { return .storage }
        return nil
    }

    /// The rules of what the device offers now (the network, the power, the app's conditions),
    /// which can change in the middle of a download: checked between its files too.
    func deviceBlock() -> DownloadBlock? {
        let network = options.network.status
        if !network.isAvailable { return .networkUnavailable }
        if network.isExpensive, !options.downloadOverCellular { return .cellularNotAllowed }
        return options.conditions.block(power: options.power.status, network: network)
    }

    /// Bytes the storage rules leave for the asset being downloaded, which holds `assetBytes`.
    func storageRoom(assetBytes: Int64, completedBytes: Int64? = nil) -> Int64 {
        var room = Int64.max
        if let maxStorage = options.maxStorage {
            // Sizes read back from the SDK database: added and subtracted without trapping.
            let completed = completedBytes ?? completedSize()
            room = maxStorage.subtractingClamped(completed).subtractingClamped(assetBytes)
        }
        if let free = LocalFiles.freeBytes(on: content.root.deletingLastPathComponent()) {
            room = min(room, free - options.headroom)
        }
        return max(room, 0)
    }

    /// The bytes of the completed assets, as recorded.
    func completedSize() -> Int64 {
        ((try? database.assets()) ?? []).reduce(0) { $0.addingClamped(max($1.size, 0)) }
    }

    /// The most the storage rules could ever leave one asset, whatever is deleted: `maxStorage`
    /// and the volume's size, less `headroom`.
    func storageCeiling() -> Int64 {
        var ceiling = options.maxStorage ?? .max
        if let volume = LocalFiles.volumeBytes(on: content.root.deletingLastPathComponent()) {
            ceiling = min(ceiling, volume - options.headroom)
        }
        return max(ceiling, 0)
    }
}
