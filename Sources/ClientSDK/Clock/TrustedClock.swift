import Foundation
import BackplaneWire
import Synchronization

/// Time for rights checks that setting the device's clock cannot move: the backplane's time at
/// the last sync plus the monotonic time since. A wall clock that drifts from the monotonic one
/// by more than the tolerance (set forward or back while the app runs), or that reads earlier
/// than time already trusted after a restart (set back while it was not running), makes time
/// untrusted until the next sync. Time-limited assets are not playable meanwhile.
///
/// After a restart there is no monotonic anchor: time is the wall clock plus the offset learnt at
/// the last sync, checked against the latest trusted time seen (kept on disk). A clock set
/// forward across a restart passes for time gone by: it can end windows early, so until a
/// sync confirms the time, an expired window locks its asset but does not delete it.
public enum TrustedTime: Sendable, Equatable {
    case trusted(Date)
    case untrusted(UntrustedReason)

    public var date: Date? {
        if case .trusted(let date) = self { return date }
        return nil
    }
}

public struct UntrustedReason: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// No sync has told the device the backplane's time yet.
    public static let neverSynced = UntrustedReason(rawValue: "neverSynced")
    /// The device's clock was set (forward or back) beyond the tolerance since the last sync.
    public static let deviceClockChanged = UntrustedReason(rawValue: "deviceClockChanged")
    public static let allCases: [UntrustedReason] = [.neverSynced, .deviceClockChanged]
}

final class TrustedClock: Sendable {
    /// What outlives the process.
    struct Stored: Codable, Equatable {
        /// The backplane's time at the last sync, and the device's wall clock at that moment.
        var syncServerTime: Date
        var syncWallTime: Date
        /// The latest trusted time seen: a wall clock reading earlier than this after a restart
        /// was set back.
        var highWater: Date
        /// Set when the device's clock was found changed; cleared by the next sync.
        var distrusted: UntrustedReason?
    }

    private struct State {
        var stored: Stored?
        /// Trusted time at a monotonic instant, and the wall clock then, in this process.
        var anchor: (trusted: Date, monotonic: TimeInterval, wall: Date)?
        /// The anchor is a sync's, not the estimate of a new process (a clock set forward
        /// while the app was not running passes that estimate).
        var confirmed = false
        /// `highWater` as last written, to write it only when it moved on.
        var savedHighWater: Date?
        /// The app was told that time is untrusted since the last sync.
        var lossReported = false
    }

    private let deviceClock: any DeviceClock
    private let tolerance: TimeInterval
    private let save: @Sendable (Stored) throws -> Void
    private let state: Mutex<State>

    init(deviceClock: any DeviceClock, tolerance: TimeInterval, stored: Stored?, save: @escaping @Sendable (Stored) throws -> Void) {
        self.deviceClock = deviceClock
        self.tolerance = tolerance
        self.save = save
        self.state = Mutex(State(stored: stored, anchor: nil, savedHighWater: stored?.highWater))
    }

    /// The monotonic clock, to time a sync's round trip.
    var monotonicNow: TimeInterval { deviceClock.monotonicNow }

    /// Whether time rests on a sync of this process: only then does the SDK act on an expiry
    /// by deleting files (before, an expired window only locks the asset).
    var isConfirmed: Bool { state.withLock { $0.confirmed && $0.anchor != nil } }

    /// The latest trusted time seen, also while time is untrusted: a safe start for a window
    /// that starts then (it can only start it early).
    var latestTrusted: Date? { state.withLock { $0.stored?.highWater } }

    /// The backplane's time at the last sync, if there was one.
    var lastSync: Date? { state.withLock { $0.stored?.syncServerTime } }

    /// A sync's answer: `serverTime` was read halfway through the round trip of `roundTrip` seconds.
    func synced(serverTime: Date, roundTrip: TimeInterval) {
        let monotonic = deviceClock.monotonicNow
        let wall = deviceClock.wallNow
        let trusted = serverTime.addingTimeInterval(max(roundTrip, 0) / 2)
        state.withLock { state in
            state.anchor = (trusted, monotonic, wall)
            state.confirmed = true
            state.lossReported = false
            // The backplane's time is the authority: the high-water mark starts again from it.
            let stored = Stored(syncServerTime: trusted, syncWallTime: wall, highWater: trusted, distrusted: nil)
            state.stored = stored
            persist(&state, stored)
        }
    }

    /// Trusted time now, or why there is none. Finding the clock changed is remembered (on
    /// disk) until the next sync.
    func now() -> TrustedTime {
        let monotonic = deviceClock.monotonicNow
        let wall = deviceClock.wallNow
        return state.withLock { state in
            guard var stored = state.stored else { return .untrusted(.neverSynced) }
            if let reason = stored.distrusted { return .untrusted(reason) }
            let trusted: Date
            if let anchor = state.anchor {
                let elapsed = monotonic - anchor.monotonic
                guard abs(wall.timeIntervalSince(anchor.wall) - elapsed) <= tolerance else {
                    return distrust(&state, &stored)
                }
                trusted = anchor.trusted.addingTimeInterval(elapsed)
            } else {
                // A new process: no monotonic reading carries over.
                let estimate = wall.addingTimeInterval(stored.syncServerTime.timeIntervalSince(stored.syncWallTime))
                guard estimate >= stored.highWater.addingTimeInterval(-tolerance) else { return distrust(&state, &stored) }
                trusted = max(estimate, stored.highWater)
                state.anchor = (trusted, monotonic, wall)
            }
            if trusted > stored.highWater {
                stored.highWater = trusted
                state.stored = stored
            }
            return .trusted(trusted)
        }
    }

    /// True the first time it is called after the clock was found changed (until the next sync):
    /// the app hears of it once.
    func noteLossReported() -> Bool {
        state.withLock { state in
            guard state.stored?.distrusted != nil, !state.lossReported else { return false }
            state.lossReported = true
            return true
        }
    }

    /// Writes the latest trusted time down, so that a clock set back while the app is not
    /// running is caught at the next start. Called by the expiry sweep and at play start, not
    /// on every read.
    func checkpoint() {
        _ = now()
        state.withLock { state in
            guard let stored = state.stored, stored.highWater != state.savedHighWater else { return }
            persist(&state, stored)
        }
    }

    private func distrust(_ state: inout State, _ stored: inout Stored) -> TrustedTime {
        stored.distrusted = .deviceClockChanged
        state.stored = stored
        state.anchor = nil
        state.confirmed = false
        persist(&state, stored)
        return .untrusted(.deviceClockChanged)
    }

    private func persist(_ state: inout State, _ stored: Stored) {
        // Not stored, it is found again at the next start (or trusted again at the next sync).
        guard (try? save(stored)) != nil else { return }
        state.savedHighWater = stored.highWater
    }
}
