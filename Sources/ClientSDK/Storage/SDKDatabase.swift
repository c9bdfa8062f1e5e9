import Foundation
import GRDB
import BackplaneWire

/// The SDK's one on-device database (`backplane-sdk.sqlite` in the data directory), opened once by
/// the engine (`SDKStorage`). Its writer is private: the records of each concern (the files beside
/// this one: identity and sync state, the event queue, subscriptions, command outcomes, the
/// download index, rights) read and write through `read` and `write`, each call one
/// transaction, so a crash never leaves half of one. The schema is `SDKMigrations.swift`'s.
final class SDKDatabase: Sendable {
    private let writer: DatabaseQueue

    init(directory: URL) throws {
        // The database holds the device credential: the directory and the database's files are
        // the app's user's alone, whatever the umask (apps in a sandbox have one of their own;
        // Linux apps and the harness share the machine with other users).
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory.path)
        let database = Self.path(in: directory)
        if !FileManager.default.fileExists(atPath: database.path) {
            // Created owner-only before SQLite opens it: its WAL and shared-memory files take
            // the database file's mode.
            _ = FileManager.default.createFile(atPath: database.path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: database.path + suffix) {
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: database.path + suffix)
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        // WAL: one fsync per commit instead of a rollback journal's several, which keeps
        // `EventLogger.log` cheap; FULL: a commit survives power loss, not only a crash.
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        writer = try DatabaseQueue(path: database.path, configuration: configuration)
        try Self.migrator.migrate(writer)
    }

    static func path(in directory: URL) -> URL {
        directory.appendingPathComponent("backplane-sdk.sqlite")
    }

    /// One read transaction.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        try writer.read(body)
    }

    /// One write transaction: all of `body` commits, or none of it.
    func write<T>(_ body: (Database) throws -> T) throws -> T {
        try writer.write(body)
    }

    static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        return encoder
    }

    static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return decoder
    }
}
