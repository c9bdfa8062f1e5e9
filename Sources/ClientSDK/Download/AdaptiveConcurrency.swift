import Synchronization

/// How many files of one asset are fetched at once: as many as the link rewards. An app cannot
/// know its link's round trip and bandwidth, and the right number follows from both: on a far
/// link each request waits a round trip before its first byte, so small segments need many in
/// flight to fill it, while on a near one a few do.
///
/// The engine starts at `DownloadOptions.parallelFiles` (twice that when the origin is known to
/// answer over HTTP/2) and measures throughput over rounds
/// ("epochs") of completed files. While a round at a higher number brings clearly more than the
/// round before it, the number doubles, then grows by a quarter; when it brings nothing, the
/// number goes back to the last one that paid and holds there for a while before it probes
/// again. It backs off by half on an overloaded origin (429, 503 and other 5xx) and by a
/// quarter on other failed tries, at most once per round of requests in flight (a burst of
/// failures of requests sent together counts once, as TCP counts losses once per window), and
/// by a quarter when throughput falls by half at the same number. While the app's bandwidth
/// cap holds the download back, more requests would not help, and the number holds.
///
/// It never passes the per-host caps: `maxConnectionsPerHost` requests to a host over HTTP/1.1,
/// where each takes a connection of its own, and `maxStreamsPerHost` to one that answers over
/// HTTP/2, where they share one connection. The caller counts what it has in flight per host
/// and asks `admits` before each file.
final class AdaptiveConcurrency: Sendable {
    struct Settings: Sendable, Equatable {
        /// Files at once before anything is measured (`parallelFiles`).
        var initial: Int
        /// Requests in flight to one HTTP/1.1 host: its connections.
        var connectionsPerHost: Int
        /// Requests in flight to one HTTP/2 host, on its one connection (the origin's
        /// `SETTINGS_MAX_CONCURRENT_STREAMS` bounds it too: the client queues past it).
        var streamsPerHost: Int
        /// Off: `initial` files at once, always.
        var adapts: Bool
    }

    /// A round's throughput must beat the last one's by this factor for a higher number to count
    /// as paying (one more request in flight on a saturated link gains nothing; noise is less).
    static let gainNeeded = 1.1
    /// Throughput below this share of the last round's at the same number is falling.
    static let fallingBelow = 0.5
    /// Rounds held at a number before probing above it again.
    static let holdRounds = 6

    private struct State {
        var settings: Settings
        var limit: Int
        /// Hosts that answered over HTTP/2.
        var multiplexed: Set<String> = []
        /// Doubling until the first round that brings nothing; then a quarter at a time.
        var doubling = true
        /// The last round measured: its number and throughput (bytes per second).
        var previous: (limit: Int, rate: Double)?
        /// When the number last changed: files asked for before it tell of the number before.
        var changedAt: ContinuousClock.Instant
        /// When the round's first file ended (nil: none yet); the round measures from there.
        var roundStart: ContinuousClock.Instant?
        var roundBytes: Int64 = 0
        var roundFiles = 0
        /// Rounds ended so far (for tests).
        var rounds = 0
        var holding = 0
        /// When the last back-off happened: failures of requests sent before it are its own.
        var lastBackOff: ContinuousClock.Instant?
        /// Every number taken, in order (for the log and tests).
        var history: [Int]
    }

    private let state: Mutex<State>
    private let now: @Sendable () -> ContinuousClock.Instant
    /// The app's cap, asked at the end of each round whether it held a fetch back.
    private let bandwidth: BandwidthLimit?

    /// `multiplexing`: origins known to answer over HTTP/2 (`OriginProtocols`). When the
    /// download's first file comes from one of them, the probe starts one doubling higher:
    /// streams on a connection that is open already cost no handshake and no socket, and a first
    /// round at few files costs most where files are large (a whole file's time per file slot).
    init(
        _ settings: Settings, bandwidth: BandwidthLimit? = nil, multiplexing: Set<String> = [], firstOrigin: String? = nil,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        let initial = max(settings.initial, 1)
        let start = if settings.adapts, let firstOrigin, multiplexing.contains(firstOrigin) {
            min(initial * 2, settings.streamsPerHost)
        } else {
            min(initial, settings.connectionsPerHost)
        }
        state = Mutex(State(settings: settings, limit: start, multiplexed: multiplexing, changedAt: now(), history: [start]))
        self.bandwidth = bandwidth
        self.now = now
    }

    /// Files that may be in flight now, over every host.
    var limit: Int { state.withLock { $0.limit } }

    /// The numbers taken so far, in order.
    var history: [Int] { state.withLock { $0.history } }

    /// Rounds measured so far.
    var rounds: Int { state.withLock { $0.rounds } }

    /// Whether one more file may start, to `host` with `toHost` in flight there and `total` in all.
    /// Under the app's bandwidth cap no more start than the cap can feed (`BandwidthLimit.filesItFeeds`).
    func admits(host: String, toHost: Int, total: Int) -> Bool {
        let fed = bandwidth?.filesItFeeds ?? .max
        return state.withLock { state in
            total < min(state.limit, fed)
                && toHost < (state.multiplexed.contains(host) ? state.settings.streamsPerHost : state.settings.connectionsPerHost)
        }
    }

    /// A file's fetch, asked for at `startedAt`, ended with `bytes` received from `host`, over
    /// HTTP/2 or not (nil: nothing was asked, the file was on disk).
    ///
    /// A round counts only files asked for at the number it measures (after the last change):
    /// those asked for before it ran beside fewer or more, and would blur the two numbers the
    /// round compares. It measures from its first file's end over as many more as the number
    /// (at least 4): about one turn of every file in flight, in steady state.
    func completed(bytes: Int64, startedAt: ContinuousClock.Instant, host: String, multiplexed: Bool?) {
        let instant = now()
        state.withLock { state in
            if let multiplexed {
                if multiplexed { state.multiplexed.insert(host) } else { state.multiplexed.remove(host) }
            }
            guard state.settings.adapts, multiplexed != nil, startedAt >= state.changedAt else { return }
            // The download's first round measures from its start, connecting included: it is
            // only the baseline the next one must beat, and a long first round at few files
            // would cost most where files are large.
            if state.roundStart == nil {
                if state.rounds == 0 {
                    state.roundStart = state.changedAt
                } else {
                    // A later round opens with its first file's end: steady state from there.
                    state.roundStart = instant
                    return
                }
            }
            let start = state.roundStart ?? instant
            state.roundBytes += bytes
            state.roundFiles += 1
            guard state.roundFiles >= max(state.limit, 4) else { return }
            let seconds = Self.seconds(instant - start)
            guard seconds > 0 else { return }
            let limit = state.limit
            Self.endRound(&state, rate: Double(state.roundBytes) / seconds, capped: bandwidth?.held(since: start) ?? false, at: instant)
            state.rounds += 1
            if state.limit == limit {
                // The next round goes on from here; after a change it waits for files of the new number.
                state.roundStart = instant
                state.roundBytes = 0
                state.roundFiles = 0
            }
        }
    }

    /// A try failed: an overloaded origin (`overloaded`: 429 or a 5xx) halves the number, any
    /// other failure takes a quarter off, once for the requests sent before the last back-off.
    func failed(startedAt: ContinuousClock.Instant, overloaded: Bool) {
        let instant = now()
        state.withLock { state in
            guard state.settings.adapts else { return }
            if let last = state.lastBackOff, startedAt < last { return }
            state.lastBackOff = instant
            let lowered = overloaded ? state.limit / 2 : state.limit - max(state.limit / 4, 1)
            Self.set(&state, max(lowered, 1), at: instant)
            state.doubling = false
            state.holding = Self.holdRounds
            // The next round measures the lower number from scratch.
            state.previous = nil
        }
    }

    /// A try asked for at `startedAt` failed with `failure`: what it says of the load, if
    /// anything. An origin that says it is overloaded (429, a 5xx), or a connection that failed
    /// or broke off; a 404, a wrong type or a full disk says nothing.
    func failed(_ failure: DownloadFailure, startedAt: ContinuousClock.Instant) {
        switch failure.kind {
        case .http where failure.status.map({ $0 == 429 || $0 >= 500 }) == true: failed(startedAt: startedAt, overloaded: true)
        case .network: failed(startedAt: startedAt, overloaded: false)
        default: break
        }
    }

    /// When a fetch's try starts, for `failed(startedAt:overloaded:)`.
    var clock: ContinuousClock.Instant { now() }

    private static func endRound(_ state: inout State, rate: Double, capped: Bool, at instant: ContinuousClock.Instant) {
        let limit = state.limit
        guard !capped, let previous = state.previous else {
            // The first round (of the download, or after a back-off, which holds a while), or
            // one the app's cap held back (it says nothing about the link).
            let first = state.previous == nil && !capped
            state.previous = (limit, rate)
            if first, state.holding > 0 {
                state.holding -= 1
            } else if first {
                grow(&state, at: instant)
            }
            return
        }
        if limit > previous.limit, rate < previous.rate * gainNeeded {
            // More in flight brought nothing: back to the number that paid (whose round stays
            // the one to beat), for a while.
            state.doubling = false
            state.holding = holdRounds
            set(&state, previous.limit, at: instant)
            return
        }
        state.previous = (limit, rate)
        if limit == previous.limit, rate < previous.rate * fallingBelow {
            state.doubling = false
            state.holding = holdRounds
            set(&state, max(limit - max(limit / 4, 1), 1), at: instant)
        } else if limit > previous.limit || state.holding == 0 {
            grow(&state, at: instant)
        } else {
            state.holding -= 1
        }
    }

    private static func grow(_ state: inout State, at instant: ContinuousClock.Instant) {
        let ceiling = state.multiplexed.isEmpty ? state.settings.connectionsPerHost : state.settings.streamsPerHost
        let next = state.doubling ? state.limit * 2 : state.limit + max(state.limit / 4, 1)
        // Never below where it is (a ceiling set lower than the start leaves it there).
        set(&state, max(min(next, ceiling), state.limit), at: instant)
    }

    private static func set(_ state: inout State, _ limit: Int, at instant: ContinuousClock.Instant) {
        guard limit != state.limit else { return }
        state.limit = limit
        state.history.append(limit)
        // Files asked for from now on measure the new number; a round starts with the first of them.
        state.changedAt = instant
        state.roundStart = nil
        state.roundBytes = 0
        state.roundFiles = 0
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
