import Foundation

// The storage rules (`maxStorage`, `headroom`) as the download loop and queueing apply them.
extension DownloadRunner {
    /// Bytes the storage rules leave for the asset being downloaded, which holds `assetBytes`.
    nonisolated func storageRoom(assetBytes: Int64, completedBytes: Int64? = nil) -> Int64 {
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
    nonisolated func completedSize() -> Int64 {
        ((try? local.assets()) ?? []).reduce(0) { $0.addingClamped(max($1.size, 0)) }
    }

    /// The most the storage rules could ever leave one asset, whatever is deleted: `maxStorage`
    /// and the volume's size, less `headroom`.
    nonisolated func storageCeiling() -> Int64 {
        var ceiling = options.maxStorage ?? .max
        if let volume = LocalFiles.volumeBytes(on: content.root.deletingLastPathComponent()) {
            ceiling = min(ceiling, volume - options.headroom)
        }
        return max(ceiling, 0)
    }
}
