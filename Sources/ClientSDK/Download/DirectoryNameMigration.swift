import Foundation
import GRDB

/// Moves the files of assets whose ids are longer than `ContentStore.plainIdBytes` from the
/// directory the old rule named (the hex of the id's first 100 bytes, which two ids could share)
/// to the one `ContentStore.directoryName(for:)` names now, and points their records at it.
///
/// Two ids that shared a directory may each have written into it, so nothing moved is trusted:
/// every moved asset is listed for the check a restart of the system gets (`SystemRestart`),
/// which downloads again a completed asset whose files do not add up to its size and starts a
/// queued one over. The directory goes to the first of the ids that claim it; the others start
/// from an empty one. Runs at every start before the download loop; with nothing left under an
/// old name it changes nothing, and a kill part-way leaves the rest for the next start.
enum DirectoryNameMigration {
    /// The system run the moved assets are listed under: never a real one, so the check runs.
    static let pseudoBoot = "directory-names-moved"

    static func run(content: ContentStore) throws {
        let local = content.local
        let (completed, queued) = try local.access { local in
            try local.queue.read { db in
                let long = "length(CAST(asset_id AS BLOB)) > \(ContentStore.plainIdBytes)"
                return (
                    try Row.fetchAll(db, sql: "SELECT asset_id, relative_path FROM assets WHERE \(long) ORDER BY added_at")
                        .map { (assetId: $0["asset_id"] as String?, path: $0["relative_path"] as String?) },
                    try String.fetchAll(db, sql: "SELECT asset_id FROM downloads WHERE \(long) ORDER BY position"))
            }
        }
        var moved: [String] = []
        var claimed: Set<String> = []
        let fileManager = FileManager.default
        for (assetId, path) in completed {
            guard let assetId, let old = ContentStore.truncatedDirectoryName(for: assetId), let path, path.hasPrefix(old + "/") else { continue }
            let new = ContentStore.directoryName(for: assetId)
            try move(old, to: new, claimed: &claimed, in: content.root, fileManager)
            let relocated = new + path.dropFirst(old.count)
            try local.access { local in
                try local.queue.write { db in
                    try db.execute(sql: "UPDATE assets SET relative_path = ? WHERE asset_id = ?", arguments: [relocated, assetId])
                }
            }
            moved.append(assetId)
        }
        for assetId in queued {
            guard let old = ContentStore.truncatedDirectoryName(for: assetId) else { continue }
            guard fileManager.fileExists(atPath: content.root.appendingPathComponent(old).path) || claimed.contains(old) else { continue }
            try move(old, to: ContentStore.directoryName(for: assetId), claimed: &claimed, in: content.root, fileManager)
            moved.append(assetId)
        }
        guard !moved.isEmpty else { return }
        try local.access { local in
            var record = try local.load(UnflushedDownloads.self, .unflushedDownloads) ?? UnflushedDownloads()
            let listed = Set(record.assetIdsByBoot[pseudoBoot] ?? [])
            record.assetIdsByBoot[pseudoBoot, default: []].append(contentsOf: moved.filter { !listed.contains($0) })
            try local.save(record, .unflushedDownloads)
        }
    }

    /// Renames the old directory to the new name for its first claimant; later claimants find
    /// it gone and start from nothing.
    private static func move(_ old: String, to new: String, claimed: inout Set<String>, in root: URL, _ fileManager: FileManager) throws {
        guard claimed.insert(old).inserted else { return }
        let source = root.appendingPathComponent(old, isDirectory: true)
        let destination = root.appendingPathComponent(new, isDirectory: true)
        guard fileManager.fileExists(atPath: source.path), !fileManager.fileExists(atPath: destination.path) else { return }
        try LocalFiles.rename(source, to: destination)
        try LocalFiles.flush(path: root, isDirectory: true)
    }
}
