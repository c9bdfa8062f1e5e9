import Foundation
import Synchronization

/// Where services announce wake-ups. One node: the hub itself. Several nodes sharing a store:
/// `RelayedWakeUps`, which also forwards them through the store's `WakeUpRelay` and delivers
/// what the other nodes sent to this node's hub.
public protocol WakeUpPublisher: Sendable {
    func publish(_ wakeUp: WakeUp)
}

/// One open device channel, as the hub sees it: something it can send a wake-up to.
public protocol WakeUpChannel: Sendable {
    /// Starts sending the wake-up and returns at once; errors (a closed connection) are the
    /// channel's own business.
    func wake()
    /// Tells the device the server is going away and closes the channel, in the background.
    func close()
}

/// The device channels open on this node, and delivery of wake-ups to them.
///
/// The hub holds each channel's handle; waking is a loop that hands each channel its frame to
/// write on its own event loop, so waking ten thousand channels takes no task switch.
public final class WakeUpHub: WakeUpPublisher, ChannelPresence {
    public struct Registration: Sendable {
        fileprivate let key: Key
        fileprivate let id: UInt64
    }

    fileprivate struct Key: Hashable, Sendable {
        var applicationId: String
        var deviceId: String
    }

    private struct State {
        var channels: [Key: [UInt64: any WakeUpChannel]] = [:]
        var nextId: UInt64 = 0
        /// False once the server stops (`closeAll`).
        var open = true
    }

    private let state = Mutex(State())
    private let metrics: BackplaneMetrics

    public init(metrics: BackplaneMetrics = .none) {
        self.metrics = metrics
    }

    /// Channels one device may hold open on a node: a reconnecting SDK's new channel may
    /// overlap its old one for a moment. A new channel past it closes the device's oldest, so
    /// that one device (one credential) cannot take every connection slot of the node.
    public static let maxChannelsPerDevice = 2

    public func register(_ channel: any WakeUpChannel, applicationId: String, deviceId: String) -> Registration {
        let key = Key(applicationId: applicationId, deviceId: deviceId)
        let (id, open, displaced) = state.withLock { state -> (UInt64, Bool, [any WakeUpChannel]) in
            state.nextId += 1
            state.channels[key, default: [:]][state.nextId] = channel
            var displaced: [any WakeUpChannel] = []
            // Ids grow with each registration: the smallest are the oldest.
            while let channels = state.channels[key], channels.count > Self.maxChannelsPerDevice, let oldest = channels.keys.min() {
                if let removed = state.channels[key]?.removeValue(forKey: oldest) { displaced.append(removed) }
            }
            return (state.nextId, state.open, displaced)
        }
        for old in displaced { old.close() }
        // An upgrade that completes while the server stops: closed like the others.
        if !open { channel.close() }
        return Registration(key: key, id: id)
    }

    public func unregister(_ registration: Registration) {
        state.withLock { state in
            state.channels[registration.key]?.removeValue(forKey: registration.id)
            if state.channels[registration.key]?.isEmpty == true { state.channels[registration.key] = nil }
        }
    }

    /// Open channels on this node.
    public var channelCount: Int {
        state.withLock { $0.channels.values.reduce(0) { $0 + $1.count } }
    }

    /// Closes every channel of this node, and from now on each channel as soon as it registers:
    /// the server is stopping. (NIO's quiescing tells the connections open when it starts; one
    /// accepted in that moment, or still upgrading, would miss it and hold the shutdown up.)
    public func closeAll() {
        let all = state.withLock { state in
            state.open = false
            return state.channels.values.flatMap(\.values)
        }
        for channel in all { channel.close() }
    }

    public func publish(_ wakeUp: WakeUp) {
        deliver(wakeUp)
    }

    /// Wakes every channel of this node: after a gap in which wake-ups may have been lost.
    public func wakeAll() {
        let all = state.withLock { $0.channels.values.flatMap(\.values) }
        for channel in all { channel.wake() }
        metrics.wakeUpsSent.increment(by: all.count)
    }

    /// Wakes the matching channels of this node; the frames are written in the background. The
    /// answer, for a wake-up of devices, is those of them that have a channel here.
    @discardableResult
    public func deliver(_ wakeUp: WakeUp) -> [String] {
        let (targets, reached): ([any WakeUpChannel], [String]) = state.withLock { state in
            switch wakeUp {
            case .devices(let applicationId, let deviceIds):
                var targets: [any WakeUpChannel] = [], reached: [String] = []
                for deviceId in deviceIds {
                    guard let channels = state.channels[Key(applicationId: applicationId, deviceId: deviceId)] else { continue }
                    targets.append(contentsOf: channels.values)
                    reached.append(deviceId)
                }
                return (targets, reached)
            case .application(let applicationId):
                return (state.channels.filter { $0.key.applicationId == applicationId }.flatMap { $0.value.values }, [])
            }
        }
        for target in targets { target.wake() }
        metrics.wakeUpsSent.increment(by: targets.count)
        return reached
    }

    // MARK: ChannelPresence

    public var answerWindow: Duration { .zero }

    public func channelOpen(applicationId: String, deviceId: String, since: ContinuousClock.Instant) -> Bool {
        state.withLock { $0.channels[Key(applicationId: applicationId, deviceId: deviceId)]?.isEmpty == false }
    }
}
