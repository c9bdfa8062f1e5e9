import Dispatch
import GRDB
import NIOConcurrencyHelpers

/// Group commit: the write transactions of concurrent requests share one SQLite commit, and so
/// one `fsync`, instead of each waiting for its own.
///
/// A write that arrives while the writer is idle commits alone, at once. Writes that arrive
/// while a commit is under way wait for it, and then go together: one `BEGIN IMMEDIATE`, each
/// write in its own savepoint, one `COMMIT`. A write that throws rolls back to its savepoint,
/// undoing only its own work, and its caller gets its error; the others go on. Every caller hears
/// back only after the shared commit, so nothing is acknowledged before it is durable. Should
/// the commit itself fail, every write in it fails with that error and none of it is kept.
///
/// Writes run one after another in arrival order, and each sees what the writes before it in
/// the same commit did, exactly as if each had committed alone: a check-and-set such as the
/// device limit stays exact.
final class GroupCommit: Sendable {
    /// At most this many writes share a commit, so that one commit stays short.
    static let maxBatch = 256

    private let writer: any DatabaseWriter
    private let queue = NIOLockedValueBox(Queue())
    /// Where batches are committed, with GRDB's synchronous write: the commit runs on this queue's
    /// thread, where an awaited write would hop to the writer's queue and back for each batch.
    private let drainQueue = DispatchQueue(label: "backplane.group-commit")

    private struct Queue {
        var waiting: [any PendingWrite] = []
        /// The drain queue is taking batches off `waiting`; a new write only joins the queue.
        var draining = false
    }

    init(_ writer: any DatabaseWriter) {
        self.writer = writer
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let write = Write(body: body, continuation: continuation)
            let startsDraining = queue.withLockedValue { queue in
                queue.waiting.append(write)
                defer { queue.draining = true }
                return !queue.draining
            }
            // Off the caller's task: the drain serves every request's writes, not the one that
            // started it. A caller's cancellation does not withdraw a write already queued: it
            // commits or fails with its batch.
            if startsDraining { drainQueue.async { self.drain() } }
        }
    }

    private func drain() {
        while true {
            let batch = queue.withLockedValue { queue in
                let batch = Array(queue.waiting.prefix(Self.maxBatch))
                queue.waiting.removeFirst(batch.count)
                if batch.isEmpty { queue.draining = false }
                return batch
            }
            if batch.isEmpty { return }
            commit(batch)
        }
    }

    private func commit(_ batch: [any PendingWrite]) {
        do {
            try writer.writeWithoutTransaction { db in
                try db.inTransaction(.immediate) {
                    // By hand rather than `inSavepoint`, which keeps going when its ROLLBACK TO
                    // fails: then a failed write's work would be committed. Prepared once.
                    let savepoint = try db.cachedStatement(sql: "SAVEPOINT grouped_write")
                    let release = try db.cachedStatement(sql: "RELEASE SAVEPOINT grouped_write")
                    let rollback = try db.cachedStatement(sql: "ROLLBACK TO SAVEPOINT grouped_write")
                    for write in batch {
                        try savepoint.execute()
                        do {
                            try write.perform(db)
                            try release.execute()
                        } catch {
                            write.failed(error)
                            // SQLite ended the whole transaction (a full disk, an I/O error): the
                            // writes before this one are gone, and those after it are not run.
                            guard db.isInsideTransaction else { throw error }
                            // If its work cannot be undone, nothing of the batch is committed.
                            try rollback.execute()
                            try release.execute()
                        }
                    }
                    return .commit
                }
            }
            for write in batch { write.finish(commitError: nil) }
        } catch {
            for write in batch { write.finish(commitError: error) }
        }
    }
}

/// One caller's write waiting in `GroupCommit`, type-erased so that writes of any result type share a batch.
private protocol PendingWrite: Sendable {
    /// Runs the write inside its savepoint (on the writer's queue).
    func perform(_ db: Database) throws
    /// The write threw and its savepoint was rolled back.
    func failed(_ error: any Error)
    /// Resumes the caller once the batch is over: with the commit's error when it failed, else
    /// with the write's own value or error.
    func finish(commitError: (any Error)?)
}

private final class Write<T: Sendable>: PendingWrite, @unchecked Sendable {
    // `outcome` is set by `perform`/`failed` and read by `finish` after the batch's
    // synchronous `writeWithoutTransaction` returned, which orders them: no lock is needed.
    private var outcome: Result<T, any Error>?
    private let body: @Sendable (Database) throws -> T
    private let continuation: CheckedContinuation<T, any Error>

    init(body: @escaping @Sendable (Database) throws -> T, continuation: CheckedContinuation<T, any Error>) {
        self.body = body
        self.continuation = continuation
    }

    func perform(_ db: Database) throws {
        outcome = .success(try body(db))
    }

    func failed(_ error: any Error) {
        outcome = .failure(error)
    }

    func finish(commitError: (any Error)?) {
        if let commitError {
            continuation.resume(throwing: commitError)
        } else if let outcome {
            continuation.resume(with: outcome)
        } else {
            // Not reached: a batch that commits ran every write.
            continuation.resume(throwing: DatabaseError(resultCode: .SQLITE_MISUSE, message: "write was not run"))
        }
    }
}
