import Foundation
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle

/// Wake-ups across the nodes sharing a store. A wake-up is delivered to this node's channels at
/// once and sent to the other nodes through the store's `WakeUpRelay`; what the others send is
/// delivered to the channels this node holds.
///
/// Relayed wake-ups are not durable: one sent while this node's listener is down is lost to it.
/// So a node whose listener (re)connects wakes all its channels once, and the devices' interval
/// sync remains the safety net.
public final class RelayedWakeUps: WakeUpPublisher, Service {
    private let relay: any WakeUpRelay
    private let hub: WakeUpHub
    private let logger: Logger
    private let outgoing: AsyncStream<WakeUp>
    private let send: AsyncStream<WakeUp>.Continuation

    init(relay: any WakeUpRelay, hub: WakeUpHub, logger: Logger = Logger(label: "backplane.wakeups")) {
        self.relay = relay
        self.hub = hub
        self.logger = logger
        (outgoing, send) = AsyncStream.makeStream(of: WakeUp.self)
    }

    public func publish(_ wakeUp: WakeUp) {
        hub.deliver(wakeUp)
        send.yield(wakeUp)
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

    /// Sends the wake-ups in the order they were published.
    private func sendAll() async {
        for await wakeUp in outgoing {
            do {
                try await relay.send(wakeUp)
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
                    received: { [hub] wakeUp in hub.deliver(wakeUp) })
            } catch {
                if Task.isCancelled { return }
                let failures = failuresInARow.withLockedValue { $0 += 1; return $0 }
                if failures == 1 {
                    logger.warning("Lost the connection that listens for other nodes' wake-ups; reconnecting", metadata: ["error": "\(error)"])
                }
            }
            // Backing off to at most 5 s between attempts while the database is away.
            let failures = failuresInARow.withLockedValue { $0 }
            try? await Task.sleep(for: .milliseconds(min(5000, 250 * (1 << min(failures, 5)))))
        }
    }
}
