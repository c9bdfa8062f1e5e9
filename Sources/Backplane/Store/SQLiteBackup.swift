import Foundation
import GRDB
import Synchronization
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

        public var description: String { rows.map { "\($0.table) \($0.count)" }.joined(separator: ", ") }
    }

    static let summarized = ["applications", "devices", "commands", "events", "episodes", "download_grants"]

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
        _ = try check(source, named: database, integrity: false)
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
    private static func check(_ database: DatabaseQueue, named name: String, integrity: Bool = true) throws -> Summary {
        do {
            return try counts(database, named: name, integrity: integrity)
        } catch let error as DatabaseError {
            throw BackupError("\(name) is not a backplane database: \(error.message ?? "\(error)").")
        }
    }

    private static func counts(_ database: DatabaseQueue, named name: String, integrity: Bool) throws -> Summary {
        try database.read { db in
            guard try !integrity || String.fetchOne(db, sql: "PRAGMA integrity_check") == "ok" else {
                throw BackupError("\(name) is damaged: SQLite's integrity check failed.")
            }
            guard try db.tableExists("grdb_migrations"), try db.tableExists("applications") else {
                throw BackupError("\(name) is not a backplane database.")
            }
            return Summary(rows: try summarized.filter { try db.tableExists($0) }.map { table in
                (table, try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0)
            })
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

/// Marks a data directory as served: `serve` holds it for its whole run, `restore` while it
/// replaces the database. An advisory lock (`flock`) on `backplane.lock` in the directory,
/// released by the kernel when the process ends, however it ends.
public final class DataDirectoryLock: Sendable {
    /// -1 once released.
    private let descriptor: Mutex<Int32>

    /// Creates the directory (owner-only) if needed and takes the lock, or throws at once when
    /// another process holds it.
    public init(directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let path = directory.appendingPathComponent("backplane.lock").path
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw BackupError("Cannot open \(path) (errno \(errno)).") }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno
            guard reason == EWOULDBLOCK else {
                close(descriptor)
                throw BackupError("Cannot lock \(path) (errno \(reason)); a file system without locks (NFS, CIFS) cannot hold the data.")
            }
            let holder = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
            close(descriptor)
            throw BackupError(
                "The data directory \(directory.path) is in use by a running backplane\(holder.map { " (pid \($0))" } ?? ""). Stop it first.")
        }
        // Who holds it, for the message above; the lock itself is what counts.
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pid.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        self.descriptor = Mutex(descriptor)
    }

    deinit { release() }

    public func release() {
        descriptor.withLock { descriptor in
            if descriptor >= 0 { close(descriptor) }
            descriptor = -1
        }
    }
}
