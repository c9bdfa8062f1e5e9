import Foundation
import NIOConcurrencyHelpers

/// Application and app-key records kept for a moment after a read: every signed request reads
/// its app key and its application's settings, the same few records over and over, so keeping
/// them for a moment spares the store those reads on most requests.
///
/// A change this store makes clears everything at once. A change another process makes (the
/// `backplane` admin commands write to the database directly) is seen once the entry is
/// `maxAge` old, so a revoked app key or a changed setting takes effect within a second.
final class RecentReads<Value: Sendable>: Sendable {
    /// How long an entry answers before the store is read again.
    static var maxAge: Duration { .seconds(1) }
    /// Entries are found records only (an unknown id is not kept, so made-up ids cannot grow
    /// the cache); past this many, the cache starts over.
    static var capacity: Int { 10_000 }

    private let state = NIOLockedValueBox(State())

    private struct State {
        var entries: [String: (value: Value, readAt: ContinuousClock.Instant)] = [:]
        /// Bumped by `clear`: a read that began before a change must not store what it read.
        var generation = 0
    }

    /// The kept value, or `read()`'s, which is kept unless a change came while it ran.
    func value(_ key: String, read: () async throws -> Value?) async throws -> Value? {
        let now = ContinuousClock.now
        let (kept, generation) = state.withLockedValue { state in
            (state.entries[key].flatMap { now - $0.readAt < Self.maxAge ? $0.value : nil }, state.generation)
        }
        if let kept { return kept }
        guard let value = try await read() else { return nil }
        state.withLockedValue { state in
            guard state.generation == generation else { return }
            if state.entries.count >= Self.capacity { state.entries.removeAll(keepingCapacity: true) }
            state.entries[key] = (value, now)
        }
        return value
    }

    /// After this store changed what the entries hold.
    func clear() {
        state.withLockedValue { state in
            state.entries.removeAll()
            state.generation += 1
        }
    }
}
