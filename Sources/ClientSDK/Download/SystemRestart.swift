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
        if sysctlbyname("kern.bootsessionuuid", &buffer, &length, nil, 0) == 0, buffer[0] != 0 {
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        var started = timeval()
        var size = MemoryLayout<timeval>.size
        guard sysctlbyname("kern.boottime", &started, &size, nil, 0) == 0 else { return nil }
        return "boot-time-\(started.tv_sec).\(started.tv_usec)"
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
            try local.access { local in
                var record = try local.load(UnflushedDownloads.self, .unflushedDownloads) ?? UnflushedDownloads()
                guard !(record.assetIdsByBoot[boot]?.contains(assetId) ?? false) else { return }
                record.assetIdsByBoot[boot, default: []].append(assetId)
                try local.save(record, .unflushedDownloads)
            }
        } catch {
            // Unlisted, a system crash in the next seconds could leave it short unnoticed.
            broadcaster.emit(.downloadWarning(assetId: assetId, message: "Could not note the download as unflushed: \(error)."))
        }
    }

    /// An asset download stopped short (paused, blocked, failed, the engine stopped): its files
    /// so far are flushed, so that a restart of the system later does not make it start over.
    /// Best effort: an app killed before this ends leaves the asset listed, and it starts over.
    func flushStopped(_ assetId: String) async {
        guard let boot = unflushedBoot else { return }
        let directory = content.directory(for: assetId)
        do {
            try await FileFetcher.waitingForTheDisk { try Self.flushTree(directory) }
            try local.access { local in
                var record = try local.load(UnflushedDownloads.self, .unflushedDownloads) ?? UnflushedDownloads()
                record.assetIdsByBoot[boot]?.removeAll { $0 == assetId }
                try local.save(record, .unflushedDownloads)
            }
        } catch {
            // Still listed: checked after a restart of the system.
        }
    }

    /// Runs before the first download: the assets written without flushes in an earlier run of
    /// the system may have lost their last bytes. A completed one whose files do not add up to
    /// its recorded size is downloaded again (the damaged files are deleted, the original
    /// playlists kept); a queued one starts over, its files being of unknown length.
    func recoverFromSystemRestart() {
        guard let record = try? local.access({ try $0.load(UnflushedDownloads.self, .unflushedDownloads) }) else { return }
        let current = options.bootSession()
        let earlier = record.assetIdsByBoot.filter { $0.key != current }
        guard !earlier.isEmpty else { return }
        for assetId in Set(earlier.values.joined()) {
            if let asset = try? local.access({ try $0.asset(assetId: assetId) }) {
                guard let request = asset.request, Self.bytesOnDisk(of: content.directory(for: assetId)) != asset.size else { continue }
                downloadAgain(asset, request: request)
            } else if (try? local.access({ try $0.queuedDownload(assetId: assetId) })) != nil {
                try? Self.removeMedia(in: content.directory(for: assetId))
                _ = try? local.access { try $0.updateDownload(assetId: assetId) { $0.bytesDownloaded = 0 } }
            }
        }
        var cleared = record
        for boot in earlier.keys { cleared.assetIdsByBoot[boot] = nil }
        try? local.access { try $0.save(cleared, .unflushedDownloads) }
    }

    private func downloadAgain(_ asset: LocalAsset, request: DownloadRequest) {
        do {
            try Self.removeMedia(in: content.directory(for: asset.assetId))
            try local.access { try $0.requeueDamagedAsset(asset.assetId, request: request) }
        } catch {
            broadcaster.emit(.downloadWarning(assetId: asset.assetId, message: "Could not queue the damaged download again: \(error)."))
            return
        }
        let message = "The system stopped before the download's last files were written; it is downloaded again."
        _ = try? eventLogger.log(.assetDeleted(assetId: asset.assetId, reason: .internal))
        _ = try? eventLogger.log(.queuedForDownload(assetId: asset.assetId))
        broadcaster.emit(.downloadWarning(assetId: asset.assetId, message: message))
        if let queued = try? self.asset(asset.assetId) { broadcaster.emit(.downloadQueued(queued)) }
    }

    /// Bytes of an asset's files as the engine counts them: all but the original playlists.
    static func bytesOnDisk(of directory: URL) -> Int64 {
        var total: Int64 = 0
        for file in mediaFiles(in: directory) {
            total += Int64((try? file.resourceValues(forKeys: [.fileSizeKey]))?.fileSize ?? 0)
        }
        return total
    }

    /// Deletes an asset's downloaded files, keeping the original playlists it was planned from
    /// (flushed when they were fetched).
    static func removeMedia(in directory: URL) throws {
        let top = (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? []
        for item in top where item.lastPathComponent != HLSDownloadPlan.originalDirectory {
            try FileManager.default.removeItem(at: item)
        }
    }

    /// Flushes every file and directory under `directory`, and the directory itself.
    static func flushTree(_ directory: URL) throws {
        guard let walk = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isDirectoryKey]) else { return }
        for case let item as URL in walk {
            let isDirectory = (try? item.resourceValues(forKeys: [.isDirectoryKey]))?.isDirectory ?? false
            try LocalFiles.flush(path: item, isDirectory: isDirectory)
        }
        try LocalFiles.flush(path: directory, isDirectory: true)
    }

    private static func mediaFiles(in directory: URL) -> [URL] {
        let manager = FileManager.default
        let top = (try? manager.contentsOfDirectory(at: directory, includingPropertiesForKeys: [.isDirectoryKey])) ?? []
        var files: [URL] = []
        for item in top where item.lastPathComponent != HLSDownloadPlan.originalDirectory {
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

extension LocalStore {
    /// A completed asset found damaged goes back to the head of the queue, in one transaction:
    /// its record goes (its grant reported deleted; a new download asks again), and its
    /// subscription item, if any, is queued again.
    func requeueDamagedAsset(_ assetId: String, request: DownloadRequest) throws {
        let data = try Self.encoder.encode(request)
        try queue.write { db in
            try Self.reportGrant(ofAsset: assetId, in: "assets", .deleted, db)
            try db.execute(sql: "DELETE FROM assets WHERE asset_id = ?", arguments: [assetId])
            guard try !(Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM downloads WHERE asset_id = ?)", arguments: [assetId]) ?? false) else { return }
            try Self.insertDownload(assetId, request: data, at: 0, db)
            try db.execute(
                sql: "UPDATE subscription_items SET state = ? WHERE asset_id = ? AND state = ?",
                arguments: [SubscriptionItem.State.queued.rawValue, assetId, SubscriptionItem.State.downloaded.rawValue])
        }
    }
}
