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

    private struct State {
        var bytesPerSecond: Int64?
        var next: ContinuousClock.Instant
        /// When a fetch last had to wait.
        var lastHeld: ContinuousClock.Instant?
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

    /// Bytes per second, at least 1 KiB/s; nil lifts the cap.
    var bytesPerSecond: Int64? {
        get { state.withLock { $0.bytesPerSecond } }
        set { state.withLock { $0.bytesPerSecond = Self.clamp(newValue) } }
    }

    /// Waits until `count` more bytes fit under the cap; returns how long it waited (zero
    /// without a wait). Throws when the task is cancelled.
    func take(_ count: Int) async throws -> Duration {
        let instant = now()
        let until: ContinuousClock.Instant? = state.withLock { state in
            guard let rate = state.bytesPerSecond, count > 0 else { return nil }
            let start = max(state.next, instant - Self.burst)
            state.next = start + .nanoseconds(Int64(count).multipliedClamped(by: 1_000_000_000) / rate)
            guard state.next > instant else { return nil }
            state.lastHeld = instant
            return state.next
        }
        guard let until else { return .zero }
        try await sleep(until)
        return until - instant
    }

    /// Whether a fetch had to wait since `instant`: the cap, not the link, set the pace.
    func held(since instant: ContinuousClock.Instant) -> Bool {
        state.withLock { $0.lastHeld.map { $0 >= instant } ?? false }
    }

    /// A cap below 1 KiB/s would fail every file as slower than `minimumTransferRate` allows.
    private static func clamp(_ value: Int64?) -> Int64? {
        value.map { max($0, 1024) }
    }
}
