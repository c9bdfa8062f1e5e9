import Foundation

/// Something changed for these devices: they should sync. Wake-ups carry no data; the queue on
/// the server is the truth and the device reads it with a sync.
public enum WakeUp: Sendable, Equatable, Codable {
    case devices(applicationId: String, deviceIds: [String])
    /// Every device of the application (settings changed).
    case application(applicationId: String)
}

/// How wake-ups travel between the nodes that share a store: a store that several nodes can
/// share offers one (`BackplaneStore.wakeUpRelay`), a store of one node none. The relay only
/// carries them; `RelayedWakeUps` (beside `WakeUpHub`) decides when to send, reconnects and
/// delivers. Like the channel frame, a relayed wake-up says whom to wake, never what changed.
public protocol WakeUpRelay: Sendable {
    /// Sends a wake-up to the other nodes (not back to this one).
    func send(_ wakeUp: WakeUp) async throws
    /// Listens for the other nodes' wake-ups: calls `listening` once it listens, then `received`
    /// for each, until cancelled or the connection drops (which throws). Wake-ups sent while no
    /// connection listens are lost; the caller makes up for them.
    func listen(listening: @Sendable () -> Void, received: @Sendable (WakeUp) -> Void) async throws
}
