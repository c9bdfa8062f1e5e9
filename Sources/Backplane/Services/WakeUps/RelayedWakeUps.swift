import Foundation
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import Synchronization

/// Wake-ups across the nodes sharing a store. A wake-up is delivered to this node's channels at
/// once and sent to the other nodes through the store's `WakeUpRelay`; what the others send is
/// delivered to the channels this node holds.
///
/// A node that wakes devices on another's behalf answers which of them had a channel there
/// (`RelayMessage.reached`): before pushing a device, the node that enqueued its command waits
/// `answerWindow` for such an answer (`ChannelPresence`).
///
/// Relayed wake-ups are not durable: one sent while this node's listener is down is lost to it.
/// So a node whose listener (re)connects wakes all its channels once, and the devices' interval
/// sync remains the safety net.
public final class RelayedWakeUps: WakeUpPublisher, ChannelPresence, Service {
    private let relay: any WakeUpRelay
    private let hub: WakeUpHub
    private let logger: Logger
    private let outgoing: AsyncStream<RelayMessage>
    private let send: AsyncStream<RelayMessage>.Continuation
    public let answerWindow: Duration
    /// Devices other nodes said they woke, and when the answer came.
    private let reached = Mutex<[ReachedKey: ContinuousClock.Instant]>([:])

    private struct ReachedKey: Hashable {
        var applicationId: String
        var deviceId: String
    }

    /// Answers older than this are forgotten: a push waits `answerWindow` (under a second).
    static let reachedMemory: Duration = .seconds(10)

    init(relay: any WakeUpRelay, hub: WakeUpHub, answerWindow: Duration = .milliseconds(300), logger: Logger = Logger(label: "backplane.wakeups")) {
        self.relay = relay
        self.hub = hub
        self.answerWindow = answerWindow
        self.logger = logger
        (outgoing, send) = AsyncStream.makeStream(of: RelayMessage.self)
    }

    public func publish(_ wakeUp: WakeUp) {
        hub.deliver(wakeUp)
        send.yield(.wakeUp(wakeUp))
    }

    public func channelOpen(applicationId: String, deviceId: String, since: ContinuousClock.Instant) -> Bool {
        if hub.channelOpen(applicationId: applicationId, deviceId: deviceId, since: since) { return true }
        return reached.withLock { $0[ReachedKey(applicationId: applicationId, deviceId: deviceId)].map { $0 >= since } ?? false }
    }

    /// What the other nodes send: wake-ups for this node's channels (answered with the devices
    /// reached), and answers to this node's own.
    private func receive(_ message: RelayMessage, from node: String) {
        switch message {
        case .wakeUp(let wakeUp):
            let woken = hub.deliver(wakeUp)
            if case .devices(let applicationId, _) = wakeUp, !woken.isEmpty {
                send.yield(.reached(node: node, applicationId: applicationId, deviceIds: woken))
            }
        case .reached(_, let applicationId, let deviceIds):
            let now = ContinuousClock.now
            reached.withLock { reached in
                // Pruned when it grows: answers are read within a second of arriving.
                if reached.count > 10_000 { reached = reached.filter { now - $0.value < Self.reachedMemory } }
                for deviceId in deviceIds { reached[ReachedKey(applicationId: applicationId, deviceId: deviceId)] = now }
            }
        }
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask { await self.sendAll() }
                group.addTask { await self.listen() }
            }
        }
        send.finish()
    }

    /// Sends the messages in the order they were published.
    private func sendAll() async {
        for await message in outgoing {
            do {
                try await relay.send(message)
            } catch {
                if Task.isCancelled { return }
                logger.warning("Could not tell the other nodes of a wake-up; their devices sync at their interval", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Listens until cancelled, connecting again after a dropped connection.
    private func listen() async {
        // Connection attempts that failed in a row; set back to 0 once one listens.
        let failuresInARow = NIOLockedValueBox(0)
        while !Task.isCancelled {
            do {
                try await relay.listen(
                    listening: { [hub, logger] in
                        // Listening (again): whatever was sent while no connection listened is
                        // lost, so every channel of this node syncs once.
                        if failuresInARow.withLockedValue({ $0 }) > 0 {
                            logger.notice("Listening for other nodes' wake-ups again; waking every channel once")
                        }
                        failuresInARow.withLockedValue { $0 = 0 }
                        hub.wakeAll()
                    },
                    received: { [weak self] message, node in self?.receive(message, from: node) })
            } catch {
                if Task.isCancelled { return }
                let failures = failuresInARow.withLockedValue { $0 += 1; return $0 }
                if failures == 1 {
                    logger.warning("Lost the connection that listens for other nodes' wake-ups; reconnecting", metadata: ["error": "\(error)"])
                }
            }
            // Backing off to at most 1 s between attempts while the database is away: a node
            // listens again within about a second of the database's return (an attempt that
            // fails costs a refused connection), and every channel is woken then.
            let failures = failuresInARow.withLockedValue { $0 }
            try? await Task.sleep(for: .milliseconds(min(1000, 250 * (1 << min(failures, 2)))))
        }
    }
}
