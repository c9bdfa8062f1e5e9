import Foundation
import Synchronization

/// The single-node SQLite store's replay protection: nonces are spent in memory, and most never
/// reach the disk. A durable *lease* makes that safe across a crash (docs/architecture.md,
/// "Nonces"):
///
/// - A nonce is spent in memory alone only when its signed timestamp is before the lease, a
///   second count written durably before it was used (`nonce_lease`).
/// - After a restart, every timestamp before the lease last written is refused
///   (`SignedBeforeRestartError`): a replay of a request spent in memory alone is then refused
///   as signed too early, and its device signs again.
/// - A nonce signed at or after the lease is recorded durably (`nonces`) in the request's own
///   write, which moves the lease forward to `leaseLength` past the request's arrival. With the
///   clock moving on, that is one shared commit every `leaseLength` seconds, plus the requests of
///   devices whose clocks run ahead. Durable nonces are loaded back into memory on start.
///
/// Each spent nonce is kept as a 64-bit hash of its key id and nonce, seeded per process
/// (`Hasher`), so an outsider cannot aim at a collision; by chance, one accepted request in
/// about 10^12 at a million kept would be refused as a replay. About 50 bytes per kept nonce (a benchmark grew by 8 MB for 160,000).
final class SpentNonces: Sendable {
    /// How far past a request's arrival a durable write moves the lease.
    static let leaseLength: Int64 = 2

    enum Spending: Equatable {
        /// Spent in memory: nothing to write.
        case inMemory
        /// To be recorded in `nonces` with the lease moved to `lease`, in the same write.
        case durable(lease: Int64)
    }

    private struct State {
        /// Timestamps before this are refused: the lease in force when the process started.
        let floor: Int64
        /// Timestamps before this may be spent in memory alone: the lease last committed.
        var lease: Int64
        /// Each spent nonce's key, and the second after which it expires.
        var spent: [Int: Int64] = [:]
        /// The same, in the order they were spent: pruned from the front, so a nonce is never
        /// forgotten early (one that expires sooner but was spent later waits for those ahead).
        var expiries: [(expiresAt: Int64, key: Int)] = []
        var pruned = 0
    }

    private let state: Mutex<State>

    /// `lease`: the lease as stored; `durable`: the nonces recorded durably and not yet pruned.
    init(lease: Int64, durable: [(keyId: String, nonce: String, expiresAt: Date)]) {
        var state = State(floor: lease, lease: lease)
        for record in durable.sorted(by: { $0.expiresAt < $1.expiresAt }) {
            let key = Self.key(record.keyId, record.nonce), expiresAt = Self.seconds(record.expiresAt)
            state.spent[key] = expiresAt
            state.expiries.append((expiresAt, key))
        }
        self.state = Mutex(state)
    }

    /// Spends `record`'s nonce: throws `SignedBeforeRestartError` for a timestamp before the
    /// floor and `NonceReusedError` for a nonce spent before. A caller whose write then fails
    /// gives it back (`giveBack`), so that the request it refused may come again.
    func spend(_ record: SignedRequestRecord) throws -> Spending {
        let timestamp = Self.seconds(record.signedAt)
        let key = Self.key(record.keyId, record.nonce), expiresAt = Self.seconds(record.expiresAt)
        return try state.withLock { state in
            guard timestamp >= state.floor else { throw SignedBeforeRestartError(notBefore: state.floor, serverTime: record.receivedAt) }
            guard state.spent[key] == nil else { throw NonceReusedError() }
            state.spent[key] = expiresAt
            state.expiries.append((expiresAt, key))
            if timestamp < state.lease { return .inMemory }
            return .durable(lease: max(state.lease, Self.seconds(record.receivedAt) + Self.leaseLength))
        }
    }

    /// Forgets a spent nonce whose request changed nothing. Its expiry entry stays and is
    /// pruned in its turn, removing only a nonce spent again with that same expiry.
    func giveBack(_ record: SignedRequestRecord) {
        _ = state.withLock { $0.spent.removeValue(forKey: Self.key(record.keyId, record.nonce)) }
    }

    /// The lease `spend` asked for is committed: timestamps before it may now be spent in memory.
    func leaseCommitted(_ lease: Int64) {
        state.withLock { $0.lease = max($0.lease, lease) }
    }

    /// Forgets nonces that expired before `date`; returns how many.
    func prune(expiredBefore date: Date) -> Int {
        let cutoff = Self.seconds(date)
        return state.withLock { state in
            var removed = 0, front = state.pruned
            while front < state.expiries.count, state.expiries[front].expiresAt < cutoff {
                let (expiresAt, key) = state.expiries[front]
                if state.spent[key] == expiresAt {
                    state.spent[key] = nil
                    removed += 1
                }
                front += 1
            }
            state.pruned = front
            // Compacted once the pruned front is most of the array: amortized O(1) per nonce.
            if state.pruned > 1_024, state.pruned * 2 > state.expiries.count {
                state.expiries.removeFirst(state.pruned)
                state.pruned = 0
            }
            return removed
        }
    }

    var count: Int { state.withLock { $0.spent.count } }

    private static func key(_ keyId: String, _ nonce: String) -> Int {
        var hasher = Hasher()
        hasher.combine(keyId)
        hasher.combine(nonce)
        return hasher.finalize()
    }

    /// Whole seconds, rounded down; dates are range-checked before they get here.
    static func seconds(_ date: Date) -> Int64 { Int64(date.timeIntervalSince1970.rounded(.down)) }
}
