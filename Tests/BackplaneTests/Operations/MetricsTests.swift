import Backplane
import Foundation
import Hummingbird
import HummingbirdTesting
import BackplaneWire
import Testing
import TestSupport

/// `GET /metrics`, read by Prometheus' own parser (`scripts/parse-metrics`, PyPI
/// prometheus-client): the counters move with real requests.
@Suite struct MetricsTests {
    @Test func countersMoveWithRequestsAndTheExpositionParses() async throws {
        let fixture = try await Fixture.make(deviceLimit: 1)
        try await fixture.test { client in
            let before = try await Self.scrape(client)

            let (phone, _) = try await client.register(user: "alice", device: "phone")
            let (_, second) = try await client.register(user: "alice", device: "tablet")
            #expect(second.deviceLimitReached)
            let enqueued = try await client.admin(.post, "/v1/admin/commands", json: EnqueueCommandRequest(type: .wipe, deviceId: "phone"))
            let command = try #require(try enqueued.decode(CommandList.self).commands.first)
            #expect(try await client.device(.post, "/v1/sync", json: SyncRequest(), as: phone).status == .ok)
            let ack = CommandAck(commandId: command.commandId, outcome: .succeeded)
            #expect(try await client.device(.post, "/v1/sync", json: SyncRequest(acks: [ack]), as: phone).status == .ok)
            let batch = EventBatch(sentAt: Date(), events: [EventTests.event(1)])
            #expect(try await client.device(.post, "/v1/events", json: batch, as: phone).status == .ok)
            #expect(try await client.device(.post, "/v1/events", json: batch, as: phone).status == .ok)
            #expect(try await client.admin(.get, "/v1/admin/settings", token: "bpt_wrong").status == .unauthorized)

            let after = try await Self.scrape(client)
            func moved(_ name: String, _ labels: [String: String] = [:]) -> Double {
                after.value(name, labels) - before.value(name, labels)
            }
            #expect(moved("backplane_registrations_total") == 2)
            #expect(moved("backplane_device_limit_refusals_total") == 1)
            #expect(moved("backplane_commands_total", ["transition": "enqueued"]) == 1)
            #expect(moved("backplane_commands_total", ["transition": "delivered"]) == 1)
            #expect(moved("backplane_commands_total", ["transition": "succeeded"]) == 1)
            #expect(moved("backplane_events_total", ["outcome": "accepted"]) == 1)
            #expect(moved("backplane_events_total", ["outcome": "duplicate"]) == 1)
            #expect(moved("backplane_http_requests_total", ["route": "/v1/sync", "method": "POST", "status_class": "2xx"]) == 2)
            #expect(moved("backplane_http_requests_total", ["route": "/v1/admin/settings", "method": "GET", "status_class": "4xx"]) == 1)
            #expect(moved("backplane_http_request_duration_seconds_count", ["route": "/v1/sync", "method": "POST"]) == 2)
            #expect(moved("backplane_db_transaction_duration_seconds_count", ["kind": "write"]) >= 4)
            #expect(after.value("backplane_nonces") >= 6, "each signed request keeps its nonce")
            #expect(after.value("backplane_build_info", ["version": BackplaneBuild.version]) == 1)
        }
    }

    @Test func aMetricsTokenIsRequiredWhenConfigured() async throws {
        let fixture = try await Fixture.make()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        let token = "scraper-secret-0123456789"
        let app = Application(router: buildRouter(fixture.services, metricsToken: token))
        try await app.test(.router) { client in
            let anonymous = try await client.execute(uri: "/metrics", method: .get)
            #expect(anonymous.status == .unauthorized)
            let wrong = try await client.execute(uri: "/metrics", method: .get, headers: [.authorization: "Bearer \(token)x"])
            #expect(wrong.status == .unauthorized)
            let scraper = try await client.execute(uri: "/metrics", method: .get, headers: [.authorization: "Bearer \(token)"])
            #expect(scraper.status == .ok)
            #expect(String(buffer: scraper.body).contains("backplane_build_info"))
        }
    }

    /// The samples of one scrape, as the reference parser reads them.
    struct Samples {
        let rows: [(name: String, labels: [String: String], value: Double)]

        /// The sample whose labels include `labels`; 0 when there is none (a counter not yet made).
        func value(_ name: String, _ labels: [String: String] = [:]) -> Double {
            rows.first { row in row.name == name && labels.allSatisfy { row.labels[$0.key] == $0.value } }?.value ?? 0
        }
    }

    static func scrape(_ client: Client) async throws -> Samples {
        let response = try await client.raw(.get, "/metrics")
        #expect(response.status == .ok)
        #expect(response.headers[.contentType]?.hasPrefix("text/plain; version=0.0.4") == true)
        let file = temporaryDirectory("backplane-metrics")
        try Data(buffer: response.body).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let parser = BuiltProduct.packageRoot.appendingPathComponent("scripts/parse-metrics")
        let parsed = try await ChildProcess.run(URL(fileURLWithPath: "/usr/bin/env"), ["python3", parser.path, file.path])
        try #require(parsed.status == 0, "the Prometheus parser refused the exposition (pip install prometheus-client): \(parsed.output)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(parsed.output.utf8)) as? [[Any]])
        return Samples(rows: rows.compactMap { row in
            guard row.count == 3, let name = row[0] as? String, let labels = row[1] as? [String: String],
                  let value = (row[2] as? NSNumber)?.doubleValue
            else { return nil }
            return (name, labels, value)
        })
    }
}
