import Foundation

/// The device's two clocks: the wall clock, which the user (or a bad network time) can set, and
/// a monotonic clock, which only moves forward, at one second per second, also in sleep.
public protocol DeviceClock: Sendable {
    /// The wall clock.
    var wallNow: Date { get }
    /// Seconds on the monotonic clock, from an arbitrary origin that restarts with the process.
    var monotonicNow: TimeInterval { get }
}

/// `Date()` and Swift's `ContinuousClock` (which keeps counting while the system sleeps).
public struct SystemDeviceClock: DeviceClock {
    private static let origin = ContinuousClock.now

    public init() {}

    public var wallNow: Date { Date() }

    public var monotonicNow: TimeInterval {
        (ContinuousClock.now - Self.origin).seconds
    }
}
