import Foundation
import GRDB

/// Moves the files of assets whose ids are longer than `ContentStore.plainIdBytes` from the
/// directory the first rule named (the hex of the id's first 100 bytes, which two ids could
/// share) to the one `ContentStore.directoryName(for:)` names now, and points their records at it.
///
/// Two ids that shared a directory may each have written into it, so nothing moved is trusted:
/// every moved asset is listed first for the check a restart of the system gets
/// (`SystemRestart`), which downloads again a completed asset whose files do not add up to its
/// size and starts a queued one over, and its original playlists are deleted, since they may be
/// the other id's (a queued HLS asset fetches its own again). The directory goes to the first of
/// the long ids that claim it; the others start from an empty one. A directory whose old name is
/// also an id of exactly 100 bytes (which keeps that name) stays where it is. Runs at every
/// start before the download loop; with nothing under an old name it changes nothing, and a
/// kill part-way leaves the rest for the next start, already listed.
enum DirectoryNameMigration {
    /// The system run the moved assets are listed under: never a real one, so the check runs.
    static let pseudoBoot = "directory-names-moved"

    private struct Move {
        var assetId: String
        var old: String
        /// The completed asset's recorded path, for its record; nil for a queued one.
        var path: String?
    }

    static func run(content: ContentStore) throws {
        let database = content.database
        let (completed, queued, plainNames) = try database.access { database in
            try database.read { db in
                let long = "length(CAST(asset_id AS BLOB)) > \(ContentStore.plainIdBytes)"
                let exact = "length(CAST(asset_id AS BLOB)) = \(ContentStore.plainIdBytes)"
                return (
                    try Row.fetchAll(db, sql: "SELECT asset_id, relative_path FROM assets WHERE \(long) ORDER BY added_at")
                        .map { (try $0.decode(String.self, forColumn: "asset_id"), try $0.decode(String.self, forColumn: "relative_path")) },
                    try String.fetchAll(db, sql: "SELECT asset_id FROM downloads WHERE \(long) ORDER BY position"),
                    Set(try String.fetchAll(db, sql: "SELECT asset_id FROM assets WHERE \(exact) UNION SELECT asset_id FROM downloads WHERE \(exact)")
                        .map(ContentStore.directoryName(for:))))
            }
        }
        let fileManager = FileManager.default
        var moves: [Move] = []
        for (assetId, path) in completed {
            guard let old = ContentStore.truncatedDirectoryName(for: assetId), path.hasPrefix(old + "/") else { continue }
            moves.append(Move(assetId: assetId, old: old, path: path))
        }
        for assetId in queued {
            guard let old = ContentStore.truncatedDirectoryName(for: assetId),
                !fileManager.fileExists(atPath: content.directory(for: assetId).path),
                fileManager.fileExists(atPath: content.root.appendingPathComponent(old).path)
            else { continue }
            moves.append(Move(assetId: assetId, old: old, path: nil))
        }
        guard !moves.isEmpty else { return }
        // Listed before anything moves: a kill after a move must not leave it unchecked.
        try database.access { database in
            var record = try database.load(UnflushedDownloads.self, .unflushedDownloads) ?? UnflushedDownloads()
            let listed = Set(record.assetIdsByBoot[pseudoBoot] ?? [])
            let adding = moves.map(\.assetId).filter { !listed.contains($0) }
            guard !adding.isEmpty else { return }
            record.assetIdsByBoot[pseudoBoot, default: []].append(contentsOf: adding)
            try database.save(record, .unflushedDownloads)
        }
        var claimed: Set<String> = []
        for move in moves {
            let new = ContentStore.directoryName(for: move.assetId)
            let source = content.root.appendingPathComponent(move.old, isDirectory: true)
            let destination = content.root.appendingPathComponent(new, isDirectory: true)
            if !plainNames.contains(move.old), claimed.insert(move.old).inserted, fileManager.fileExists(atPath: source.path),
                !fileManager.fileExists(atPath: destination.path)
            {
                try LocalFiles.rename(source, to: destination)
                try? fileManager.removeItem(at: destination.appendingPathComponent(AssetLayout.originalDirectory))
                try LocalFiles.flush(path: content.root, isDirectory: true)
            }
            guard let path = move.path else { continue }
            let relocated = new + path.dropFirst(move.old.count)
            try database.access { database in
                try database.write { db in
                    try db.execute(sql: "UPDATE assets SET relative_path = ? WHERE asset_id = ?", arguments: [relocated, move.assetId])
                }
            }
        }
    }
}
