import Foundation
import GRDB
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Online backups of the embedded store and their restore (`backplane backup` / `restore`).
///
/// Copying `backplane.sqlite` while the server runs can lose data: in WAL mode the newest
/// commits live in `backplane.sqlite-wal` until a checkpoint. A backup goes through SQLite's
/// backup API instead, from one read transaction of the running store, so it is the database as
/// of one commit, whatever is being written meanwhile.
public enum SQLiteBackup {
    /// Row counts of a database, for what `backup` and `restore` print.
    public struct Summary: Sendable, CustomStringConvertible {
        public let rows: [(table: String, count: Int)]
        /// The fingerprints of the key-encryption keys its content keys are sealed under: a
        /// backup never holds those keys, so whoever keeps it must keep them too.
        public let contentKeysSealedWith: [String]

        public var description: String { rows.map { "\($0.table) \($0.count)" }.joined(separator: ", ") }

        /// What to tell whoever keeps the copy, when it holds content keys.
        public var keyEncryptionNote: String? {
            guard !contentKeysSealedWith.isEmpty else { return nil }
            return "Its content keys are sealed under key-encryption key \(contentKeysSealedWith.joined(separator: ", ")), "
                + "which is not in it: keep that key (\(KeyEncryptionKey.fileName) in the data directory, or the "
                + "--key-encryption-key-file) apart from the backup; without it the content keys cannot be opened."
        }
    }

    static let summarized = ["applications", "devices", "commands", "events", "episodes", "download_grants", "content_keys"]

    /// Writes a copy of the database in `directory` to `file`, which must not exist. The database
    /// is opened as it is (never created or migrated: a mistyped directory is an error, not an
    /// empty backup). The copy is written beside `file` first, made owner-only (it holds the app
    /// key secrets), checked, flushed to disk, then renamed into place: `file` is whole or absent.
    public static func backup(directory: URL, to file: URL) throws -> Summary {
        let files = FileManager.default
        let database = directory.appendingPathComponent("backplane.sqlite").path
        guard files.fileExists(atPath: database) else { throw BackupError("No backplane.sqlite in \(directory.path).") }
        guard !files.fileExists(atPath: file.path) else {
            throw BackupError("\(file.path) exists; a backup never replaces a file. Choose a new name.")
        }
        var configuration = Configuration()
        // The server may be writing: wait for its lock rather than fail.
        configuration.busyMode = .timeout(10)
        let source: DatabaseQueue
        do {
            source = try DatabaseQueue(path: database, configuration: configuration)
        } catch let error as DatabaseError {
            throw BackupError("\(database) is not a backplane database: \(error.message ?? "\(error)").")
        }
        // Only that it is a backplane database: the copy is checked and counted, not the live file.
        try reading(source, named: database) { db in try requireBackplaneTables(db, named: database) }
        let partial = file.path + ".partial"
        try? files.removeItem(atPath: partial)
        guard files.createFile(atPath: partial, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw BackupError("Cannot create \(partial).")
        }
        do {
            let destination = try DatabaseQueue(path: partial)
            // One read transaction of the source: the database as of one commit.
            try source.backup(to: destination)
            try source.close()
            let summary = try check(destination, named: file.path)
            try destination.close()
            try flush(partial)
            try files.moveItem(atPath: partial, toPath: file.path)
            try flush(file.deletingLastPathComponent().path)
            return summary
        } catch {
            try? files.removeItem(atPath: partial)
            throw error
        }
    }

    /// Makes `backup` the database of `directory`. Refuses while a server holds the directory
    /// (`DataDirectoryLock`), and holds it meanwhile so none starts. A database already there is
    /// kept beside it, renamed `backplane.sqlite.before-restore-<time>` (with its WAL), not deleted.
    public static func restore(from backup: URL, into directory: URL, now: Date = Date()) throws -> (Summary, keptAside: String?) {
        let lock = try DataDirectoryLock(directory: directory)
        defer { lock.release() }
        let files = FileManager.default
        guard files.fileExists(atPath: backup.path) else { throw BackupError("No file \(backup.path).") }
        var configuration = Configuration()
        configuration.readonly = true
        let source: DatabaseQueue
        do {
            source = try DatabaseQueue(path: backup.path, configuration: configuration)
        } catch let error as DatabaseError {
            throw BackupError("\(backup.path) is not a backplane database: \(error.message ?? "\(error)").")
        }
        _ = try check(source, named: backup.path)
        let known = Set(SQLiteStore.migrator.migrations)
        let applied = try source.read { db in try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations") }
        if let unknown = applied.first(where: { !known.contains($0) }) {
            throw BackupError("\(backup.path) comes from a newer backplane (migration '\(unknown)'); restore it with that version.")
        }

        let database = directory.appendingPathComponent("backplane.sqlite").path
        let incoming = database + ".restoring"
        try? files.removeItem(atPath: incoming)
        guard files.createFile(atPath: incoming, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw BackupError("Cannot create \(incoming).")
        }
        let summary: Summary
        do {
            let destination = try DatabaseQueue(path: incoming)
            try source.backup(to: destination)
            summary = try check(destination, named: incoming)
            try destination.close()
            try source.close()
            try flush(incoming)
            try giveToDirectoryOwner(incoming, directory: directory)
        } catch {
            try? files.removeItem(atPath: incoming)
            throw error
        }

        var keptAside: String?
        var movedAside: [(from: String, to: String)] = []
        do {
            if files.fileExists(atPath: database) {
                let stamp = ISO8601DateFormatter.string(
                    from: now, timeZone: .gmt, formatOptions: [.withYear, .withMonth, .withDay, .withTime, .withTimeZone])
                let aside = database + ".before-restore-" + stamp
                // The WAL and shared-memory files keep SQLite's naming, so the old database opens as it was.
                for suffix in ["", "-wal", "-shm"] where files.fileExists(atPath: database + suffix) {
                    try files.moveItem(atPath: database + suffix, toPath: aside + suffix)
                    movedAside.append((database + suffix, aside + suffix))
                }
                keptAside = aside
            }
            try files.moveItem(atPath: incoming, toPath: database)
        } catch {
            // Put back what was there: a directory left without its database would start empty.
            for (original, aside) in movedAside.reversed() { try? files.moveItem(atPath: aside, toPath: original) }
            try? files.removeItem(atPath: incoming)
            throw error
        }
        try flush(directory.path)
        return (summary, keptAside)
    }

    /// Run as root for a service that runs as its own user (the systemd unit's `backplane`), a
    /// restored file owned by root would be unreadable to the server: it is given to whoever owns
    /// the directory.
    private static func giveToDirectoryOwner(_ path: String, directory: URL) throws {
        guard getuid() == 0 else { return }
        let owner = try FileManager.default.attributesOfItem(atPath: directory.path)
        guard let uid = (owner[.ownerAccountID] as? NSNumber)?.uint32Value, let gid = (owner[.groupOwnerAccountID] as? NSNumber)?.uint32Value,
              uid != 0
        else { return }
        guard chown(path, uid, gid) == 0 else { throw BackupError("Cannot give \(path) to the directory's owner (errno \(errno)).") }
    }

    /// Integrity and row counts; refuses a file that is not a backplane database.
    /// Integrity, the backplane's tables, and row counts (what `backup` and `restore` print).
    private static func check(_ database: DatabaseQueue, named name: String) throws -> Summary {
        try reading(database, named: name) { db in
            guard try String.fetchOne(db, sql: "PRAGMA integrity_check") == "ok" else {
                throw BackupError("\(name) is damaged: SQLite's integrity check failed.")
            }
            try requireBackplaneTables(db, named: name)
            return Summary(
                rows: try summarized.filter { try db.tableExists($0) }.map { table in
                    (table, try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0)
                },
                contentKeysSealedWith: try db.tableExists("content_keys")
                    ? String.fetchAll(db, sql: "SELECT DISTINCT sealed_with FROM content_keys ORDER BY sealed_with") : [])
        }
    }

    /// Refuses a file that is not a backplane database; reads no rows.
    private static func requireBackplaneTables(_ db: Database, named name: String) throws {
        guard try db.tableExists("grdb_migrations"), try db.tableExists("applications") else {
            throw BackupError("\(name) is not a backplane database.")
        }
    }

    /// A read of `database`; an SQLite error (not a database at all) says so in one line.
    private static func reading<T>(_ database: DatabaseQueue, named name: String, _ body: (Database) throws -> T) throws -> T {
        do {
            return try database.read(body)
        } catch let error as DatabaseError {
            throw BackupError("\(name) is not a backplane database: \(error.message ?? "\(error)").")
        }
    }

    /// Waits until the file's (or directory's) contents are on disk.
    private static func flush(_ path: String) throws {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw BackupError("Cannot open \(path) to flush it.") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw BackupError("Cannot flush \(path) to disk (errno \(errno)).") }
    }
}

public struct BackupError: Error, CustomStringConvertible {
    public let description: String

    init(_ description: String) { self.description = description }
}
