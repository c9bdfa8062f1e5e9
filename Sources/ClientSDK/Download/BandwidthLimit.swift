import Synchronization

/// The app's cap on what downloads take from the network (`DownloadOptions.maxBytesPerSecond`,
/// `engine.downloads.setBandwidthLimit`), e.g. while the user streams: every body buffer of
/// every file in flight takes its bytes from one schedule, so the files share the cap whatever
/// their number. A fetch that waits here does not read from its connection, and the client
/// then stops reading from the socket, so the cap holds on the network, not only on the disk.
///
/// A schedule rather than a bucket: each buffer is given the time its bytes may have arrived by
/// at the cap, and waits until then. The schedule may lag the clock by `burst`, so a pause of
/// the download banks at most that much (a few buffers), never a burst of everything unspent.
final class BandwidthLimit: Sendable {
    /// How far behind the clock the schedule may fall.
    static let burst = Duration.milliseconds(100)

    /// The lowest cap: below it one 64 KiB body buffer would wait longer than the client's read
    /// timeout (30 s) allows, and fail the try.
    static let lowest: Int64 = 16 << 10
    /// How long one file's next buffer may have to wait at most, with `filesItFeeds` in flight:
    /// well inside the client's read timeout, which runs while a fetch waits here.
    static let longestWait = Duration.seconds(8)
    /// The largest body buffer the client hands over.
    static let bufferBytes: Int64 = 64 << 10

    private struct State {
        var bytesPerSecond: Int64?
        var next: ContinuousClock.Instant
        /// When a fetch last had to wait.
        var lastHeld: ContinuousClock.Instant?
        /// Changes with the cap: fetches waiting under the old one take their turn again.
        var generation = 0
    }

    private let state: Mutex<State>
    private let now: @Sendable () -> ContinuousClock.Instant
    private let sleep: @Sendable (ContinuousClock.Instant) async throws -> Void

    init(
        bytesPerSecond: Int64?, now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now },
        sleep: @escaping @Sendable (ContinuousClock.Instant) async throws -> Void = { try await Task.sleep(until: $0, clock: .continuous) }
    ) {
        state = Mutex(State(bytesPerSecond: Self.clamp(bytesPerSecond), next: now()))
        self.now = now
        self.sleep = sleep
    }

    /// Bytes per second, at least `lowest`; nil lifts the cap. A change starts the schedule
    /// afresh and reaches the fetches already waiting within `slice`.
    var bytesPerSecond: Int64? {
        get { state.withLock { $0.bytesPerSecond } }
        set {
            let instant = now()
            state.withLock { state in
                state.bytesPerSecond = Self.clamp(newValue)
                state.next = instant
                state.generation += 1
            }
        }
    }

    /// How many files the cap can feed at once so that none waits longer than `longestWait` for
    /// its next buffer (nil: no cap). The engine starts no more than this.
    var filesItFeeds: Int? {
        guard let rate = bytesPerSecond else { return nil }
        let perWait = rate.multipliedClamped(by: Int64(Self.longestWait.components.seconds))
        return Int(max(perWait / Self.bufferBytes, 1))
    }

    /// The longest single sleep: a waiting fetch looks this often whether the cap changed.
    static let slice = Duration.milliseconds(250)

    /// Waits until `count` more bytes fit under the cap; returns how long it waited (zero
    /// without a wait). Throws when the task is cancelled.
    func take(_ count: Int) async throws -> Duration {
        let started = now()
        while true {
            let instant = now()
            let booked: (until: ContinuousClock.Instant, generation: Int)? = state.withLock { state in
                guard let rate = state.bytesPerSecond, count > 0 else { return nil }
                let start = max(state.next, instant - Self.burst)
                state.next = start + .nanoseconds(Int64(count).multipliedClamped(by: 1_000_000_000) / rate)
                guard state.next > instant else { return nil }
                state.lastHeld = instant
                return (state.next, state.generation)
            }
            guard let booked else { return now() - started }
            // In slices, so that a cap lifted or changed meanwhile is heard.
            var changed = false
            while !changed, now() < booked.until {
                try await sleep(min(booked.until, now() + Self.slice))
                changed = state.withLock { $0.generation != booked.generation }
            }
            if !changed { return now() - started }
        }
    }

    /// Whether a fetch had to wait since `instant`: the cap, not the link, set the pace.
    func held(since instant: ContinuousClock.Instant) -> Bool {
        state.withLock { $0.lastHeld.map { $0 >= instant } ?? false }
    }

    /// Nil stays nil; a cap is at least `lowest`.
    private static func clamp(_ value: Int64?) -> Int64? {
        value.map { max($0, lowest) }
    }
}
