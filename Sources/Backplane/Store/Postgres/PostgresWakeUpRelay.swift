import Foundation
import Logging
import PostgresNIO

/// Wake-ups between the nodes sharing a PostgreSQL database: sent with `NOTIFY`, received by
/// `LISTEN` on one connection of the pool (`RelayedWakeUps` reconnects and delivers).
struct PostgresWakeUpRelay: WakeUpRelay {
    static let channel = "backplane_wakeups"
    /// PostgreSQL refuses payloads of 8,000 bytes or more; a larger wake-up goes out as the
    /// whole application's (other nodes wake more channels than needed, never fewer).
    static let maxPayloadBytes = 7_900

    let client: PostgresClient
    /// Forgets the applications this node read recently: settings changed on another node.
    let forgetApplications: @Sendable () -> Void
    let logger: Logger
    /// This node's notifications come back to it too: it skips its own.
    let node = UUID().uuidString

    struct Notice: Codable {
        var node: String
        var wakeUp: WakeUp
    }

    func send(_ wakeUp: WakeUp) async throws {
        let encoder = JSONEncoder()
        var payload = String(decoding: try encoder.encode(Notice(node: node, wakeUp: wakeUp)), as: UTF8.self)
        if payload.utf8.count > Self.maxPayloadBytes, case .devices(let applicationId, _) = wakeUp {
            payload = String(decoding: try encoder.encode(Notice(node: node, wakeUp: .application(applicationId: applicationId))), as: UTF8.self)
        }
        _ = try await client.query("SELECT pg_notify(\(Self.channel), \(payload))", logger: logger).collect()
    }

    func listen(listening: @Sendable () -> Void, received: @Sendable (WakeUp) -> Void) async throws {
        let decoder = JSONDecoder()
        try await client.withConnection { connection in
            try await connection.listen(on: Self.channel) { notifications in
                listening()
                for try await notification in notifications {
                    guard let notice = try? decoder.decode(Notice.self, from: Data(notification.payload.utf8)), notice.node != node else { continue }
                    // Settings changed on another node: the devices woken must read them, not
                    // what this node read less than a second ago.
                    if case .application = notice.wakeUp { forgetApplications() }
                    received(notice.wakeUp)
                }
            }
        }
    }
}
