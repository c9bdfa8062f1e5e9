import Foundation
import GRDB
import NIOConcurrencyHelpers

/// Read-only connections of their own for the point reads every request makes (its app key, its
/// application, its device and the device's open commands), run on the calling thread.
///
/// Why: `DatabasePool.read` from async code costs two thread hand-offs, to a reader's queue and
/// back, and every request pays them, for a read that is itself a few index look-ups in pages
/// SQLite has cached: on the calling thread it costs only itself. Why not the pool's own readers
/// synchronously: the pool's async reads hold a reader across an await, so a thread of the
/// concurrency pool blocked waiting for one can wait for the very threads it blocks (this
/// deadlocked under load when tried). These connections are never awaited on and never waited
/// for: `take` gives one that is free or none, and then the caller reads through the pool. Reads
/// in WAL mode do not wait for the writer; in the rare cases where SQLite answers busy to a reader
/// (another process recovering the WAL after a crash) these connections answer at once rather
/// than wait, and the caller reads through the pool instead (`SQLiteStore.pointRead`). So a
/// point read holds its thread for the read itself only.
final class PointReaders: Sendable {
    private let free: NIOLockedValueBox<[DatabaseQueue]>

    /// One connection per core: each thread of the concurrency pool finds one free.
    init(path: String, configuration: Configuration) throws {
        var configuration = configuration
        configuration.readonly = true
        configuration.busyMode = .immediateError
        let count = min(max(ProcessInfo.processInfo.activeProcessorCount, 2), 16)
        free = NIOLockedValueBox(try (0..<count).map { _ in try DatabaseQueue(path: path, configuration: configuration) })
    }

    /// A free connection, or nil at once when none is; give it back with `giveBack`.
    func take() -> DatabaseQueue? {
        free.withLockedValue { $0.popLast() }
    }

    func giveBack(_ connection: DatabaseQueue) {
        free.withLockedValue { $0.append(connection) }
    }
}
