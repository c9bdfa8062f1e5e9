import Foundation
import Synchronization
import BackplaneWire

/// The offset between the backplane's clock and the device's, from the server time in sync
/// answers (taken at the midpoint of the request, as NTP does), and the first timestamp a
/// just-restarted backplane named as the one it accepts.
final class ServerClock: Sendable {
    private struct State {
        var offset: TimeInterval = 0
        /// From a refusal of a request signed before the backplane restarted (`notBefore`).
        var signNotBefore: Date?
    }

    private let state = Mutex(State())

    var offset: TimeInterval { state.withLock { $0.offset } }

    func now() -> Date { Date().addingTimeInterval(offset) }

    /// The time to sign a request with: the backplane's time, but never before the first
    /// timestamp a just-restarted backplane accepts. Kept apart from the offset, which other
    /// answers set back to the backplane's time meanwhile: a retry signed concurrently with them
    /// would otherwise be refused again.
    func signingNow() -> Date {
        let (now, notBefore) = state.withLock { (Date().addingTimeInterval($0.offset), $0.signNotBefore) }
        guard let notBefore else { return now }
        return max(now, notBefore)
    }

    /// Offsets further than this are not a device clock's error but a broken or hostile answer;
    /// taking one would move signing timestamps past what an integer holds.
    static let plausibleOffset: TimeInterval = 200 * 365 * 86_400

    func update(offset: TimeInterval) {
        guard offset.isFinite, abs(offset) <= Self.plausibleOffset else { return }
        state.withLock { $0.offset = offset }
    }

    func observe(serverTime: Date, sentAt: Date, receivedAt: Date) {
        guard WireLimits.acceptedDates.contains(serverTime) else { return }
        let midpoint = sentAt.addingTimeInterval(receivedAt.timeIntervalSince(sentAt) / 2)
        update(offset: serverTime.timeIntervalSince(midpoint))
    }

    /// A `stale_timestamp` answer carries the server's time in `details.serverTime` (Unix seconds),
    /// and, when the request was signed before the server restarted, the first timestamp it
    /// accepts in `details.notBefore`: requests are signed no earlier than that from then on
    /// (it is a few seconds ahead at most, and soon in the past).
    func learn(fromStaleTimestamp error: BackplaneClientError) {
        guard let serverSeconds = error.details?["serverTime"]?.intValue else { return }
        update(offset: Double(serverSeconds) - Date().timeIntervalSince1970)
        if let notBefore = error.details?["notBefore"]?.intValue,
           abs(Double(notBefore) - Double(serverSeconds)) <= RequestSigning.allowedClockSkew {
            state.withLock { $0.signNotBefore = max($0.signNotBefore ?? .distantPast, Date(timeIntervalSince1970: Double(notBefore))) }
        }
    }
}
