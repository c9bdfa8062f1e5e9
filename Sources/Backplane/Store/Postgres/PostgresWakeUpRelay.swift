import Foundation
import Logging
import PostgresNIO

/// Wake-ups between the nodes sharing a PostgreSQL database: sent with `NOTIFY`, received by
/// `LISTEN` on one connection of the pool (`RelayedWakeUps` reconnects and delivers).
struct PostgresWakeUpRelay: WakeUpRelay {
    static let channel = "backplane_wakeups"
    /// PostgreSQL refuses payloads of 8,000 bytes or more: a longer list of devices goes out in
    /// several notifications, each under this.
    static let maxPayloadBytes = 7_900

    let client: PostgresClient
    /// Forgets the applications this node read recently: settings changed on another node.
    let forgetApplications: @Sendable () -> Void
    let logger: Logger
    /// This node's notifications come back to it too: it skips its own.
    let node = UUID().uuidString

    /// One notification. `wakeUp` alone is what nodes before `reached` sent and read; a node
    /// of that version skips a notice it cannot read.
    struct Notice: Codable {
        var node: String
        var wakeUp: WakeUp?
        var reached: Reached?
    }

    struct Reached: Codable {
        var node: String
        var applicationId: String
        var deviceIds: [String]
    }

    func send(_ message: RelayMessage) async throws {
        for payload in try Self.payloads(message, from: node) {
            _ = try await client.query("SELECT pg_notify(\(Self.channel), \(payload))", logger: logger).collect()
        }
    }

    /// The notifications carrying `message`: one, or a list of devices split over several.
    static func payloads(_ message: RelayMessage, from node: String) throws -> [String] {
        let encoder = JSONEncoder()
        func encoded(_ notice: Notice) throws -> String { String(decoding: try encoder.encode(notice), as: UTF8.self) }
        func split(_ deviceIds: [String], _ make: ([String]) -> Notice) throws -> [String] {
            let whole = try encoded(make(deviceIds))
            guard whole.utf8.count > maxPayloadBytes, deviceIds.count > 1 else { return [whole] }
            let half = deviceIds.count / 2
            return try split(Array(deviceIds[..<half]), make) + split(Array(deviceIds[half...]), make)
        }
        switch message {
        case .wakeUp(.devices(let applicationId, let deviceIds)):
            return try split(deviceIds) { Notice(node: node, wakeUp: .devices(applicationId: applicationId, deviceIds: $0)) }
        case .wakeUp(let wakeUp):
            return [try encoded(Notice(node: node, wakeUp: wakeUp))]
        case .reached(let to, let applicationId, let deviceIds):
            return try split(deviceIds) { Notice(node: node, reached: Reached(node: to, applicationId: applicationId, deviceIds: $0)) }
        }
    }

    func listen(listening: @Sendable () -> Void, received: @Sendable (RelayMessage, _ from: String) -> Void) async throws {
        let decoder = JSONDecoder()
        try await client.withConnection { connection in
            try await connection.listen(on: Self.channel) { notifications in
                listening()
                for try await notification in notifications {
                    guard let notice = try? decoder.decode(Notice.self, from: Data(notification.payload.utf8)), notice.node != node else { continue }
                    if let wakeUp = notice.wakeUp {
                        // Settings changed on another node: the devices woken must read them, not
                        // what this node read less than a second ago.
                        if case .application = wakeUp { forgetApplications() }
                        received(.wakeUp(wakeUp), notice.node)
                    } else if let reached = notice.reached, reached.node == node {
                        received(.reached(node: reached.node, applicationId: reached.applicationId, deviceIds: reached.deviceIds), notice.node)
                    }
                }
            }
        }
    }
}
