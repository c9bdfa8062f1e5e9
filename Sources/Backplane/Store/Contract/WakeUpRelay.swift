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
    /// This node's name among the nodes (the address of a `.reached` answer).
    var node: String { get }
    /// Sends a message to the other nodes (not back to this one).
    func send(_ message: RelayMessage) async throws
    /// Listens for the other nodes' messages: calls `listening` once it listens, then `received`
    /// for each with the node that sent it, until cancelled or the connection drops (which
    /// throws). Messages sent while no connection listens are lost; the caller makes up for them.
    func listen(listening: @Sendable () -> Void, received: @Sendable (RelayMessage, _ from: String) -> Void) async throws
}

/// What nodes tell each other.
public enum RelayMessage: Sendable, Equatable {
    case wakeUp(WakeUp)
    /// The answer to node `node`'s wake-up of devices: these of them have a channel open on the
    /// node that answers (which woke them). Before pushing a device, a node waits a moment for it.
    case reached(node: String, applicationId: String, deviceIds: [String])
}
