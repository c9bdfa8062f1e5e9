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

/// One open device channel, as the hub sees it: something it can send a wake-up to.
public protocol WakeUpChannel: Sendable {
    /// Sends the wake-up; errors (a closed connection) are the channel's own business.
    func wake() async
}

/// The device channels open on this node, and delivery of wake-ups to them.
///
/// The hub holds each channel's writer and writes the frames itself from a few worker tasks,
/// so an idle channel costs no task of its own and waking ten thousand channels is a loop, not
/// ten thousand task switches.
public final class WakeUpHub: WakeUpPublisher {
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
    }

    private let state = Mutex(State())
    /// Concurrent writers for one delivery.
    private let workers: Int

    public init(workers: Int = 8) {
        self.workers = max(1, workers)
    }

    public func register(_ channel: any WakeUpChannel, applicationId: String, deviceId: String) -> Registration {
        let key = Key(applicationId: applicationId, deviceId: deviceId)
        let id = state.withLock { state in
            state.nextId += 1
            state.channels[key, default: [:]][state.nextId] = channel
            return state.nextId
        }
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

    public func publish(_ wakeUp: WakeUp) {
        deliver(wakeUp)
    }

    /// Wakes the matching channels of this node, in the background.
    public func deliver(_ wakeUp: WakeUp) {
        let targets: [any WakeUpChannel] = state.withLock { state in
            switch wakeUp {
            case .devices(let applicationId, let deviceIds):
                return deviceIds.flatMap { deviceId in
                    state.channels[Key(applicationId: applicationId, deviceId: deviceId)].map { Array($0.values) } ?? []
                }
            case .application(let applicationId):
                return state.channels.filter { $0.key.applicationId == applicationId }.flatMap { $0.value.values }
            }
        }
        guard !targets.isEmpty else { return }
        let workers = min(self.workers, targets.count)
        Task {
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<workers {
                    group.addTask {
                        for index in stride(from: worker, to: targets.count, by: workers) {
                            await targets[index].wake()
                        }
                    }
                }
            }
        }
    }
}
