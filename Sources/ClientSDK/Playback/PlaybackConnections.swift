import NIOCore
import Synchronization

/// The playback server's open connections, across its event loops, under one cap
/// (`PlaybackOptions.maxConnections`). A connection is a stranger's until it sends a request
/// under the run's token (`prove`); from then on it is a player's. When a new connection passes
/// the cap, the oldest stranger's is closed: a flood of idle connections from another app then
/// only ever holds the cap's worth of descriptors, and each connection a player opens pushes out
/// an idle one instead of waiting behind them. A player's connection is never closed for room.
final class PlaybackConnections: Sendable {
    struct Entry {
        let channel: any Channel
        var isPlayers: Bool
    }

    private struct State {
        /// Ids grow with each connection, so the smallest is the oldest.
        var nextId: UInt64 = 0
        var open: [UInt64: Entry] = [:]
    }

    let limit: Int
    private let state = Mutex(State())

    init(limit: Int) {
        self.limit = limit
    }

    /// Counts a connection that was just accepted and returns its id; closes the one that makes
    /// room, if the cap is passed (the new one itself when every other is a player's).
    func admit(_ channel: any Channel) -> UInt64 {
        let (id, evicted) = state.withLock { state -> (UInt64, (any Channel)?) in
            let id = state.nextId
            state.nextId += 1
            state.open[id] = Entry(channel: channel, isPlayers: false)
            guard state.open.count > limit else { return (id, nil) }
            // At most `limit + 1` entries: a scan costs less than keeping a second index in order.
            var oldest: UInt64?
            for (candidate, entry) in state.open where !entry.isPlayers && candidate < (oldest ?? .max) {
                oldest = candidate
            }
            // Taken out now, not when it closes: the next connection looks for another.
            return (id, oldest.flatMap { state.open.removeValue(forKey: $0)?.channel })
        }
        evicted?.close(promise: nil)
        return id
    }

    /// The connection sent a request under the token: it is a player's from now on.
    func prove(_ id: UInt64) {
        state.withLock { $0.open[id]?.isPlayers = true }
    }

    /// The connection closed (or was closed to make room, which took it out already).
    func leave(_ id: UInt64) {
        _ = state.withLock { $0.open.removeValue(forKey: id) }
    }

    /// Open connections, and how many of them are players' (for tests and diagnostics).
    var counts: (open: Int, players: Int) {
        state.withLock { state in (state.open.count, state.open.values.filter(\.isPlayers).count) }
    }
}
