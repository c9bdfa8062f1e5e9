import Foundation

/// Whether a device has a channel open anywhere: what decides, before a push, that the device
/// is reached without one. One node knows its own channels (`WakeUpHub`); with several, the
/// others answer a wake-up for devices whose channel they hold (`RelayedWakeUps`), within
/// `answerWindow` of it being sent.
public protocol ChannelPresence: Sendable {
    /// How long after a wake-up is published the answers of other nodes can take to come back:
    /// zero for one node.
    var answerWindow: Duration { get }
    /// True when a channel of the device is open on this node, or another node answered, at
    /// `since` or later, that it woke one.
    func channelOpen(applicationId: String, deviceId: String, since: ContinuousClock.Instant) -> Bool
}
