import Foundation
import Synchronization

/// Something changed for these devices: they should sync. Wake-ups carry no data; the queue on
/// the server is the truth and the device reads it with a sync.
public enum WakeUp: Sendable, Equatable, Codable {
    case devices(applicationId: String, deviceIds: [String])
    /// Every device of the application (settings changed).
    case application(applicationId: String)
}

/// Where services announce wake-ups. One node: the hub itself. Several nodes: a publisher that
/// also forwards to the others (PostgreSQL NOTIFY), whose listeners call `WakeUpHub.deliver`.
public protocol WakeUpPublisher: Sendable {
    func publish(_ wakeUp: WakeUp)
}

/// The device channels open on this node, and delivery of wake-ups to them.
public final class WakeUpHub: WakeUpPublisher {
    public struct Subscription: Sendable {
        public let wakeUps: AsyncStream<Void>
        fileprivate let key: Key
        fileprivate let id: UInt64
    }

    fileprivate struct Key: Hashable, Sendable {
        var applicationId: String
        var deviceId: String
    }

    private struct State {
        var channels: [Key: [UInt64: AsyncStream<Void>.Continuation]] = [:]
        var nextId: UInt64 = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// A channel for one device. Wake-ups that arrive while the channel is busy collapse into
    /// one: a device that syncs once sees everything.
    public func subscribe(applicationId: String, deviceId: String) -> Subscription {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let key = Key(applicationId: applicationId, deviceId: deviceId)
        let id = state.withLock { state in
            state.nextId += 1
            state.channels[key, default: [:]][state.nextId] = continuation
            return state.nextId
        }
        return Subscription(wakeUps: stream, key: key, id: id)
    }

    public func unsubscribe(_ subscription: Subscription) {
        let continuation = state.withLock { state -> AsyncStream<Void>.Continuation? in
            let removed = state.channels[subscription.key]?.removeValue(forKey: subscription.id)
            if state.channels[subscription.key]?.isEmpty == true { state.channels[subscription.key] = nil }
            return removed
        }
        continuation?.finish()
    }

    /// Open channels on this node.
    public var channelCount: Int {
        state.withLock { $0.channels.values.reduce(0) { $0 + $1.count } }
    }

    public func publish(_ wakeUp: WakeUp) {
        deliver(wakeUp)
    }

    /// Wakes the matching channels of this node.
    public func deliver(_ wakeUp: WakeUp) {
        let targets: [AsyncStream<Void>.Continuation] = state.withLock { state in
            switch wakeUp {
            case .devices(let applicationId, let deviceIds):
                return deviceIds.flatMap { deviceId in
                    state.channels[Key(applicationId: applicationId, deviceId: deviceId)].map { Array($0.values) } ?? []
                }
            case .application(let applicationId):
                return state.channels.filter { $0.key.applicationId == applicationId }.flatMap { $0.value.values }
            }
        }
        for continuation in targets { continuation.yield() }
    }
}
