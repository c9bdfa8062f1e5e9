/// The slowest an answer's body may arrive, as curl's `--speed-limit` and `--speed-time`: at
/// least `bytesPerSecond` on average over every `window` of the transfer, or the try fails as a
/// network failure (and the rule of threes goes on). A trickling origin (one byte every few
/// seconds, each in time for the client's read timeout) would otherwise hold a download, or
/// the queueing of an HLS asset, for ever.
public struct TransferRate: Sendable, Equatable {
    /// 0 turns the rule off; at most 1 GiB/s.
    public var bytesPerSecond: Int64 {
        didSet { bytesPerSecond = Self.clampRate(bytesPerSecond) }
    }
    /// 1 s to a day.
    public var window: Duration {
        didSet { window = Self.clampWindow(window) }
    }

    public init(bytesPerSecond: Int64, over window: Duration) {
        self.bytesPerSecond = Self.clampRate(bytesPerSecond)
        self.window = Self.clampWindow(window)
    }

    /// 1 KiB/s over 30 s: far below any network a video plays over, far above a stall.
    public static let `default` = TransferRate(bytesPerSecond: 1024, over: .seconds(30))

    private static func clampRate(_ value: Int64) -> Int64 { min(max(value, 0), 1 << 30) }
    private static func clampWindow(_ value: Duration) -> Duration { min(max(value, .seconds(1)), .seconds(86_400)) }

    func watch() -> Watch { Watch(rule: self, start: .now) }

    /// One answer's body, measured as it arrives.
    struct Watch {
        let rule: TransferRate
        var start: ContinuousClock.Instant
        var bytes: Int64 = 0

        /// Leaves `duration` out of the window: time the download held itself back (the
        /// app's bandwidth cap), not time the origin took.
        mutating func excuse(_ duration: Duration) {
            if duration > .zero { start += duration }
        }

        /// Counts `count` bytes just received; returns what arrived over the window when that
        /// was too slow.
        mutating func add(_ count: Int) -> (bytes: Int64, seconds: Int64)? {
            guard rule.bytesPerSecond > 0 else { return nil }
            bytes = bytes.addingClamped(Int64(count))
            let now = ContinuousClock.now
            let elapsed = now - start
            guard elapsed >= rule.window else { return nil }
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            if Double(bytes) < Double(rule.bytesPerSecond) * seconds { return (bytes, elapsed.components.seconds) }
            start = now
            bytes = 0
            return nil
        }
    }
}
