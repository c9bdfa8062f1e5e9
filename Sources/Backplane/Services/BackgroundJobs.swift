import Foundation
import Logging
import ServiceLifecycle

// The backplane's periodic jobs, each a `Service` in the application's service group
// (`buildApplication`), stopped by graceful shutdown.

/// Forgets nonces once their timestamps can no longer pass the freshness check.
struct NonceJanitor: Service {
    let store: any BackplaneStore
    let interval: Duration
    let logger: Logger
    let now: @Sendable () -> Date

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while true {
                try await Task.sleep(for: interval)
                do {
                    let removed = try await store.pruneNonces(expiredBefore: now())
                    if removed > 0 { logger.debug("Pruned expired nonces", metadata: ["count": "\(removed)"]) }
                } catch {
                    logger.warning("Could not prune nonces", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}

/// Marks open commands past their expiry as expired (`CommandExpiry`, the rule), so that the queue's stored states (what
/// the command list filters and the overview counts) are the commands' states within one
/// interval, whether or not their devices sync. Small batches, like `EventRetention`.
struct CommandExpirySweep: Service {
    let store: any BackplaneStore
    let interval: Duration
    let batchSize = 1000
    let logger: Logger
    let now: @Sendable () -> Date

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while true {
                try await Task.sleep(for: max(interval, .milliseconds(100)))
                await pass()
            }
        }
    }

    /// One pass: batches until one comes back short.
    func pass() async {
        do {
            var total = 0
            while true {
                let expired = try await store.expireCommands(at: now(), limit: batchSize)
                total += expired
                if expired < batchSize || Task.isCancelled { break }
            }
            if total > 0 { logger.info("Expired open commands past their expiry", metadata: ["count": "\(total)"]) }
        } catch {
            logger.warning("Could not expire commands; trying again at the next pass", metadata: ["error": "\(error)"])
        }
    }
}

/// Writes the last-seen times `LastSeenLog` noted and the credential uses `CredentialUseLog`
/// noted, every `interval` and once more at shutdown.
struct LastSeenWriter: Service {
    let log: LastSeenLog
    let credentialUse: CredentialUseLog
    let store: any BackplaneStore
    let interval: Duration
    let logger: Logger

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while true {
                // At least a tenth of a second: a zero interval would spin.
                try await Task.sleep(for: max(interval, .milliseconds(100)))
                await write()
            }
        }
        // After the server stopped taking requests: what the last ones noted is kept too.
        await write()
    }

    private func write() async {
        do {
            try await log.flush(to: store)
            try await credentialUse.flush(to: store)
        } catch {
            logger.warning("Could not write last-seen times; keeping them for the next batch", metadata: ["error": "\(error)"])
        }
    }
}

/// Deletes events older than the retention age, a small batch per transaction so ingestion
/// (which needs the same write lock) waits at most one batch.
public struct EventRetention: Service {
    let store: any BackplaneStore
    /// Events whose corrected time is older than this are deleted.
    let maxAge: Duration
    let interval: Duration
    let batchSize: Int
    let logger: Logger
    let now: @Sendable () -> Date

    public init(
        store: any BackplaneStore, maxAge: Duration, interval: Duration = .seconds(3600), batchSize: Int = 1000, logger: Logger,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store
        self.maxAge = maxAge
        self.interval = interval
        self.batchSize = batchSize
        self.logger = logger
        self.now = now
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while true {
                do {
                    let removed = try await runOnce()
                    if removed > 0 { logger.info("Deleted events past retention", metadata: ["count": "\(removed)"]) }
                } catch is CancellationError {
                    return
                } catch {
                    logger.warning("Could not apply event retention", metadata: ["error": "\(error)"])
                }
                try await Task.sleep(for: interval)
            }
        }
    }

    /// One pass: deletes batch after batch until nothing is past the cutoff. Returns how many.
    public func runOnce() async throws -> Int {
        let cutoff = now().addingTimeInterval(-maxAge.seconds)
        var total = 0
        while true {
            try Task.checkCancellation()
            let removed = try await store.deleteEvents(correctedBefore: cutoff, limit: batchSize)
            total += removed
            if removed < batchSize { return total }
            // Let waiting writers (ingestion) take the lock between batches.
            await Task.yield()
        }
    }
}

/// Closes the device channels when the server stops, however it stops, including those whose
/// upgrade completes after that (`WakeUpHub.closeAll`). The server's quiescing reaches the
/// channels open when it starts; this one also reaches a channel accepted or still upgrading
/// at that moment, which would otherwise keep the shutdown waiting for as long as it answers
/// pings, since a channel holds no task that shutdown or cancellation could end.
struct WakeUpChannelCloser: Service {
    let hub: WakeUpHub

    func run() async throws {
        try? await gracefulShutdown()
        hub.closeAll()
    }
}
