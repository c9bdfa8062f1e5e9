import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle

/// Wake-ups across the nodes sharing a PostgreSQL database. A wake-up is delivered to this node's
/// channels at once and sent to the other nodes with `NOTIFY`; each node `LISTEN`s and delivers
/// what the others sent to the channels it holds. Like the channel frame, a notification carries
/// no content: whom to wake, never what changed.
///
/// Notifications are not durable: one sent while a node's listening connection is down is lost
/// to that node. So a node whose listener (re)connects wakes all its channels once, and the
/// devices' interval sync remains the safety net.
public final class PostgresWakeUps: WakeUpPublisher, Service {
    static let channel = "backplane_wakeups"
    /// PostgreSQL refuses payloads of 8,000 bytes or more; a larger wake-up goes out as the
    /// whole application's (other nodes wake more channels than needed, never fewer).
    static let maxPayloadBytes = 7_900

    private let client: PostgresClient
    private let hub: WakeUpHub
    private let forgetApplications: @Sendable () -> Void
    private let logger: Logger
    /// This node's notifications come back to it too: it skips its own.
    private let node = UUID().uuidString
    private let outgoing: AsyncStream<WakeUp>
    private let send: AsyncStream<WakeUp>.Continuation

    struct Notice: Codable {
        var node: String
        var wakeUp: WakeUp
    }

    init(store: PostgresStore, hub: WakeUpHub) {
        self.client = store.client
        self.hub = hub
        self.forgetApplications = { [recent = store.recentApplications] in recent.clear() }
        self.logger = store.logger
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
        let encoder = JSONEncoder()
        for await wakeUp in outgoing {
            do {
                var payload = String(decoding: try encoder.encode(Notice(node: node, wakeUp: wakeUp)), as: UTF8.self)
                if payload.utf8.count > Self.maxPayloadBytes, case .devices(let applicationId, _) = wakeUp {
                    payload = String(decoding: try encoder.encode(Notice(node: node, wakeUp: .application(applicationId: applicationId))), as: UTF8.self)
                }
                _ = try await client.query("SELECT pg_notify(\(Self.channel), \(payload))", logger: logger).collect()
            } catch {
                if Task.isCancelled { return }
                logger.warning("Could not tell the other nodes of a wake-up; their devices sync at their interval", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Listens until cancelled, connecting again after a dropped connection.
    private func listen() async {
        let decoder = JSONDecoder()
        var failures = 0
        while !Task.isCancelled {
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: Self.channel) { notifications in
                        // Listening (again): whatever was sent while no connection listened is lost, so
                        // every channel of this node syncs once.
                        if failures > 0 { logger.notice("Listening for other nodes' wake-ups again; waking every channel once") }
                        failures = 0
                        hub.wakeAll()
                        for try await notification in notifications {
                            guard let notice = try? decoder.decode(Notice.self, from: Data(notification.payload.utf8)) else { continue }
                            guard notice.node != node else { continue }
                            // Settings changed on another node: the devices woken must read them, not
                            // what this node read less than a second ago.
                            if case .application = notice.wakeUp { forgetApplications() }
                            hub.deliver(notice.wakeUp)
                        }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                failures += 1
                if failures == 1 {
                    logger.warning("Lost the connection that listens for other nodes' wake-ups; reconnecting", metadata: ["error": "\(error)"])
                }
            }
            // Backing off to at most 5 s between attempts while the database is away.
            try? await Task.sleep(for: .milliseconds(min(5000, 250 * (1 << min(failures, 5)))))
        }
    }
}
