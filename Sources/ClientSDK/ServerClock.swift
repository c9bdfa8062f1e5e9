import Foundation
import BackplaneWire

/// The offset between the backplane's clock and the device's, from the server time in sync
/// answers (taken at the midpoint of the request, as NTP does).
final class ServerClock: Sendable {
    private let state = Mutex<TimeInterval>(0)

    var offset: TimeInterval { state.withLock { $0 } }

    func now() -> Date { Date().addingTimeInterval(offset) }

    /// Offsets further than this are not a device clock's error but a broken or hostile answer;
    /// taking one would move signing timestamps past what an integer holds.
    static let plausibleOffset: TimeInterval = 200 * 365 * 86_400

    func update(offset: TimeInterval) {
        guard offset.isFinite, abs(offset) <= Self.plausibleOffset else { return }
        state.withLock { $0 = offset }
    }

    func observe(serverTime: Date, sentAt: Date, receivedAt: Date) {
        guard WireLimits.acceptedDates.contains(serverTime) else { return }
        let midpoint = sentAt.addingTimeInterval(receivedAt.timeIntervalSince(sentAt) / 2)
        update(offset: serverTime.timeIntervalSince(midpoint))
    }

    /// A `stale_timestamp` answer carries the server's time in `details.serverTime` (Unix seconds).
    func learn(fromStaleTimestamp error: BackplaneClientError) {
        guard let serverSeconds = error.details?["serverTime"]?.intValue else { return }
        update(offset: Double(serverSeconds) - Date().timeIntervalSince1970)
    }
}
