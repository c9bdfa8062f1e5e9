import ClientSDK
import Foundation
import TestSupport

/// A simulated world's time for rights tests: the true time (the backplane's clock), the device's
/// monotonic clock, and the device's wall clock, which the user may set off the true time.
final class SimulatedTime: DeviceClock, @unchecked Sendable {
    private let lock = NSLock()
    private var trueTime: Date
    private var monotonic: TimeInterval = 1_000
    private var wallSkew: TimeInterval = 0

    init(start: Date = Date()) {
        trueTime = start
    }

    private func locked<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    /// The backplane's clock.
    var now: Date { locked { trueTime } }
    var wallNow: Date { locked { trueTime.addingTimeInterval(wallSkew) } }
    var monotonicNow: TimeInterval { locked { monotonic } }

    /// Time passes.
    func advance(by seconds: TimeInterval) {
        locked {
            trueTime = trueTime.addingTimeInterval(seconds)
            monotonic += seconds
        }
    }

    /// The user sets the device's wall clock; no time passes.
    func setWallClock(by seconds: TimeInterval) {
        locked { wallSkew += seconds }
    }

    /// The app process starts again: the monotonic clock restarts from another origin.
    func restartProcess() {
        locked { monotonic = 5 }
    }
}
