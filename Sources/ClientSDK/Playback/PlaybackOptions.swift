import Foundation

/// Limits of the loopback playback server (`engine.playback`). Any app on the device can
/// connect to its port, token or not, so each limit bounds what a stranger can hold: descriptors
/// (a phone's process has about 1,024), memory and the server's attention. Values out of range
/// are clamped, in `init` and on assignment alike.
public struct PlaybackOptions: Sendable, Equatable {
    /// Open connections at once: 4 to 1,024. When a new connection would pass it, the oldest
    /// connection that has not yet sent a request under the run's token is closed, never one
    /// that has (a player's): a stranger's connections make room for a player's, not the other
    /// way round. When every connection is a player's, the new one is closed.
    public var maxConnections: Int {
        didSet { maxConnections = Self.clampConnections(maxConnections) }
    }
    /// How long a connection that has not sent a request under the token has to send a complete
    /// request (its head, and its body if it has one), counted from when it opened and from the
    /// end of each answer: 100 ms to 10 minutes. A slow or idle stranger is disconnected then.
    public var requestHeadTimeout: Duration {
        didSet { requestHeadTimeout = Self.clamp(requestHeadTimeout, upTo: .seconds(600)) }
    }
    /// The same for a connection that has sent a request under the token: how long a player's
    /// kept-alive connection may wait between requests (a paused player), 100 ms to 1 hour.
    /// Players open a new connection when they find one closed.
    public var idleTimeout: Duration {
        didSet { idleTimeout = Self.clamp(idleTimeout, upTo: .seconds(3_600)) }
    }
    /// How long the server stops accepting after the system refuses it a descriptor (`EMFILE`,
    /// `ENFILE`): 10 ms to 10 s. Connections wait in the listen backlog meanwhile, instead of
    /// the server spinning on a failing `accept`.
    public var acceptBackoff: Duration {
        didSet { acceptBackoff = Self.clampBackoff(acceptBackoff) }
    }

    public init(
        maxConnections: Int = 64, requestHeadTimeout: Duration = .seconds(10), idleTimeout: Duration = .seconds(60),
        acceptBackoff: Duration = .milliseconds(500)
    ) {
        self.maxConnections = Self.clampConnections(maxConnections)
        self.requestHeadTimeout = Self.clamp(requestHeadTimeout, upTo: .seconds(600))
        self.idleTimeout = Self.clamp(idleTimeout, upTo: .seconds(3_600))
        self.acceptBackoff = Self.clampBackoff(acceptBackoff)
    }

    private static func clampConnections(_ value: Int) -> Int {
        min(max(value, 4), 1_024)
    }

    private static func clamp(_ value: Duration, upTo ceiling: Duration) -> Duration {
        min(max(value, .milliseconds(100)), ceiling)
    }

    private static func clampBackoff(_ value: Duration) -> Duration {
        min(max(value, .milliseconds(10)), .seconds(10))
    }
}
