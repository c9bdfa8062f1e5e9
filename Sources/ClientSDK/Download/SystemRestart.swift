import Foundation
import GRDB
import BackplaneWire

#if canImport(Darwin)
import Darwin
#endif

/// Which run of the operating system this is. Written bytes not yet flushed are the system's:
/// they survive the app's kill, and are lost only when the system stops without writing them
/// (power loss, a crash), which always ends its run. So a download written without flushes in
/// an earlier run is the only one that can be short on disk.
enum BootSession {
    /// An id that changes with every start of the system; nil where the SDK cannot tell (then
    /// the engine flushes every file, `DownloadOptions.flushesFiles` or not).
    static func current() -> String? {
        #if os(Linux)
        // Read by hand: the file reports a size of 0, and Foundation's readers trust sizes.
        guard let handle = FileHandle(forReadingAtPath: "/proc/sys/kernel/random/boot_id"),
              let data = try? handle.readToEnd() else { return nil }
        try? handle.close()
        let id = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return id.isEmpty ? nil : id
        #elseif canImport(Darwin)
        var buffer = [CChar](repeating: 0, count: 64)
        var length = buffer.count
        // Not `kern.boottime`: the system moves it when the clock is set, which would look like
        // a restart.
        guard sysctlbyname("kern.bootsessionuuid", &buffer, &length, nil, 0) == 0, buffer[0] != 0 else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        #else
        return nil
        #endif
    }
}

/// The assets written without flushes, by the system run that wrote them (stored as
/// `unflushed-downloads`). An asset stays listed until its files are known to be on disk or
/// checked after a restart of the system.
struct UnflushedDownloads: Codable, Equatable {
    var assetIdsByBoot: [String: [String]] = [:]
}

extension DownloadRunner {
    /// Lists `assetId` as written without flushes in this system run, before its first write.
    func noteUnflushed(_ assetId: String) {
        guard let boot = unflushedBoot else { return }
        do {
            try database.access { database in
                var record = try database.load(UnflushedDownloads.self, .unflushedDownloads) ?? UnflushedDownloads()
                guard !(record.assetIdsByBoot[boot]?.contains(assetId) ?? false) else { return }
                record.assetIdsByBoot[boot, default: []].append(assetId)
                try database.save(record, .unflushedDownloads)
            }
        } catch {
            // Unlisted, a system crash in the next seconds could leave it short unnoticed.
            events.tellApp(.downloadWarning(assetId: assetId, message: "Could not note the download as unflushed: \(error)."))
        }
    }

    /// An asset download stopped short (paused, blocked, failed, the engine stopped): its files
    /// so far are flushed, so that a restart of the system later does not make it start over.
    /// Best effort: an app killed before this ends leaves the asset listed, for the next start.
    func flushStopped(_ assetId: String) async {
        guard let boot = unflushedBoot, await flushFiles(of: assetId) else { return }
        // A loop started since may be writing it again, unflushed.
        guard !isDownloading(assetId) else { return }
        unlist(assetId, boot: boot)
    }

    /// Runs before the loop's first download. An asset listed by this run of the system was left
    /// by an app kill: its bytes are the system's, whole, and are flushed now. One listed by an
    /// earlier run may have lost its last bytes with that run: a completed one whose files do
    /// not add up to its size is downloaded again (its files deleted, the original playlists
    /// kept); a queued one starts over, any of its files being possibly short. Each asset is
    /// unlisted once settled, so a crash part-way leaves the rest for the next start.
    func settleUnflushed() async {
        guard let record = try? database.access({ try $0.load(UnflushedDownloads.self, .unflushedDownloads) }) else { return }
        let current = options.bootSession()
        for (boot, assetIds) in record.assetIdsByBoot {
            for assetId in assetIds {
                let settled = boot == current ? await flushFiles(of: assetId) : checkAfterRestart(assetId)
                if settled { unlist(assetId, boot: boot) }
            }
        }
    }

    /// Whether the asset's files are on disk now (or it has none left).
    private func flushFiles(of assetId: String) async -> Bool {
        let directory = content.directory(for: assetId)
        do {
            try await LocalFiles.waitingForTheDisk { try Self.flushTree(directory) }
            return true
        } catch {
            // Deleted meanwhile, or the flush failed: listed still, unless the asset is gone.
            return (try? database.access { try $0.asset(assetId: assetId) == nil && $0.queuedDownload(assetId: assetId) == nil }) ?? false
        }
    }

    /// After a restart of the system; whether the asset is settled.
    private func checkAfterRestart(_ assetId: String) -> Bool {
        let directory = content.directory(for: assetId)
        do {
            if let asset = try database.access({ try $0.asset(assetId: assetId) }) {
                guard let request = asset.request, Self.bytesOnDisk(of: directory) != asset.size else { return true }
                try downloadAgain(asset, request: request)
            } else if try database.access({ try $0.queuedDownload(assetId: assetId) }) != nil {
                do {
                    try Self.removeMedia(in: directory)
                } catch {
                    // Going on would resume over files that may be short: failed until the app
                    // clears its retries, and checked again at the next start (still listed).
                    failed(assetId, DownloadFailure(.storage, "Could not delete the files a restart of the system may have cut short: \(error)."), forGood: true)
                    return false
                }
                _ = try database.access { try $0.updateDownload(assetId: assetId) { $0.bytesDownloaded = 0 } }
            }
            return true
        } catch {
            events.tellApp(.downloadWarning(assetId: assetId, message: "Could not check the download after a restart of the system: \(error)."))
            return false
        }
    }

    private func downloadAgain(_ asset: LocalAsset, request: DownloadRequest) throws {
        let licensed = try database.access { try $0.assetIdsHoldingLicense(queued: false) }.contains(asset.assetId)
        try Self.removeMedia(in: content.directory(for: asset.assetId))
        // Deleted meanwhile (a remote wipe, an expiry): it stays deleted.
        guard try database.access({ try $0.requeueDamagedAsset(asset.assetId, request: request) }) else { return }
        if licensed { content.release([asset.assetId]) }
        let message = "The system stopped before the download's last files were written; it is downloaded again."
        events.log(.assetDeleted(assetId: asset.assetId, reason: .internal))
        events.log(.queuedForDownload(assetId: asset.assetId))
        events.tellApp(.downloadWarning(assetId: asset.assetId, message: message))
        if let queued = try? self.asset(asset.assetId) { events.tellApp(.downloadQueued(queued)) }
    }

    private func unlist(_ assetId: String, boot: String) {
        try? database.access { database in
            guard var record = try database.load(UnflushedDownloads.self, .unflushedDownloads) else { return }
            record.assetIdsByBoot[boot]?.removeAll { $0 == assetId }
            if record.assetIdsByBoot[boot]?.isEmpty == true { record.assetIdsByBoot[boot] = nil }
            try database.save(record, .unflushedDownloads)
        }
    }

    /// Bytes of an asset's files as the engine counts them: all but the original playlists.
    static func bytesOnDisk(of directory: URL) -> Int64 {
        var total: Int64 = 0
        // A resume file left by a kill between a file's rename and its removal is not the asset's.
        for file in mediaFiles(in: directory) where !file.lastPathComponent.hasSuffix(".partial-info") {
            total += Int64((try? file.resourceValues(forKeys: [.fileSizeKey]))?.fileSize ?? 0)
        }
        return total
    }

    /// Deletes an asset's downloaded files, keeping the original playlists it was planned from
    /// (flushed when they were fetched), and flushes the deletions: a second crash must not
    /// bring short files back under their final names.
    static func removeMedia(in directory: URL) throws {
        let top = (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? []
        for item in top where item.lastPathComponent != AssetLayout.originalDirectory {
            try FileManager.default.removeItem(at: item)
        }
        if !top.isEmpty { try LocalFiles.flush(path: directory, isDirectory: true) }
    }

    /// Flushes every file and directory under an asset's `directory` (on Apple platforms each as
    /// far as an ordering barrier), then the directory itself and the two above it, which hold
    /// its name and `content/`'s (a flat file's download creates both), fully, taking the
    /// drive's cache with them.
    static func flushTree(_ directory: URL) throws {
        guard LocalFiles.size(of: directory) != nil else { return }
        guard let walk = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isDirectoryKey]) else { return }
        for case let item as URL in walk {
            let isDirectory = (try? item.resourceValues(forKeys: [.isDirectoryKey]))?.isDirectory ?? false
            try LocalFiles.flush(path: item, isDirectory: isDirectory, fully: false)
        }
        try LocalFiles.flushAssetDirectory(directory)
    }

    private static func mediaFiles(in directory: URL) -> [URL] {
        let manager = FileManager.default
        let top = (try? manager.contentsOfDirectory(at: directory, includingPropertiesForKeys: [.isDirectoryKey])) ?? []
        var files: [URL] = []
        for item in top where item.lastPathComponent != AssetLayout.originalDirectory {
            guard (try? item.resourceValues(forKeys: [.isDirectoryKey]))?.isDirectory == true else {
                files.append(item)
                continue
            }
            let walk = manager.enumerator(at: item, includingPropertiesForKeys: [.isRegularFileKey])
            while let file = walk?.nextObject() as? URL {
                if (try? file.resourceValues(forKeys: [.isRegularFileKey]))?.isRegularFile == true { files.append(file) }
            }
        }
        return files
    }
}
