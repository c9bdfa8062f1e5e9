import Foundation
import HTTPTypes
import BackplaneWire
import Testing
import TestSupport

/// `backplane copy-data` moves an embedded backplane into PostgreSQL; its devices then go on
/// against a node on PostgreSQL where they were.
@Suite(.serialized, .enabled(if: PostgresCluster.isAvailable, "PostgreSQL is not installed"))
struct CopyDataTests {
    /// What the device holds after its time on SQLite.
    struct SQLiteSide: Sendable {
        var phone: DeviceIdentity
        var cursor: String
        /// A sync the SQLite server answered, whose nonce it spent in memory alone.
        var answeredSync: HTTPFields
    }

    @Test func aCopiedBackplaneServesItsDevicesWhereTheyWere() async throws {
        let binary = try #require(ExecutableTests.executable, "build the backplane product first")
        let fixture = try await Fixture.make()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        let cms = try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .cms, name: "cms")
        @Sendable func episode(_ id: String) -> EpisodeInput {
            EpisodeInput(assetId: id, title: id, downloadURL: "https://cdn.example.com/\(id).mp4", mediaType: .file, sizeBytes: 1000)
        }

        // On SQLite: a device that subscribed, read every change and ran a command to the end.
        let box = Box<SQLiteSide>()
        // Not `fixture.test`, which removes the data directory at its end.
        try await fixture.application().test(.router) { raw in
            let client = Client(raw: raw, fixture: fixture)
            let (phone, _) = try await client.register(user: "alice", device: "phone")
            #expect(try await client.admin(.put, "/v1/cms/feeds/show", json: FeedInput(title: "Show"), token: cms).status.code < 300)
            _ = try await client.admin(.post, "/v1/cms/feeds/show/episodes", json: PublishEpisodesRequest(episodes: [episode("e1")]), token: cms)
            #expect(try await client.device(.put, "/v1/subscriptions/show", json: SubscribeRequest(), as: phone).status.code < 300)
            _ = try await client.admin(.post, "/v1/cms/feeds/show/episodes", json: PublishEpisodesRequest(episodes: [episode("e2")]), token: cms)
            let changes = try await client.device(.get, "/v1/subscriptions/changes", as: phone).decode(EpisodeChanges.self)
            #expect(changes.changes.map(\.assetId) == ["e2"])
            let enqueued = try await client.admin(.post, "/v1/admin/commands", json: EnqueueCommandRequest(type: .deleteAssets, deviceId: "phone", assetIds: ["e1"]))
            #expect(enqueued.status == .created, "\(enqueued.text)")
            let delivered = try await client.device(.post, "/v1/sync", json: SyncRequest(), as: phone).decode(SyncResponse.self)
            let command = try #require(delivered.commands.first)
            let acked = try await client.device(
                .post, "/v1/sync", json: SyncRequest(acks: [CommandAck(commandId: command.commandId, outcome: .succeeded)]), as: phone)
            #expect(try acked.decode(SyncResponse.self).commands.isEmpty)
            // Events, with the number and text columns filled.
            let events = [
                EventTests.event(1, .downloadComplete(assetId: "e1", bitrate: 2_000_000, durationSeconds: 12.5)),
                EventTests.event(2, .custom(name: "note", string: "copied", number: 4.5)),
            ]
            let uploaded = try await client.device(.post, "/v1/events", json: EventBatch(sentAt: Date(), events: events), as: phone)
            #expect(try uploaded.decode(EventBatchResponse.self).accepted == 2, "\(uploaded.text)")
            let syncBody = try Client.encode(SyncRequest())
            let answeredSync = fixture.signer.headers(
                method: .post, path: "/v1/sync", body: syncBody, deviceId: phone.deviceId, credential: phone.credential)
            #expect(try await client.raw(.post, "/v1/sync", headers: answeredSync, body: syncBody).status == .ok)
            box.value = SQLiteSide(phone: phone, cursor: changes.cursor, answeredSync: answeredSync)
        }
        let (phone, cursor, answeredSync) = try #require(box.value.map { ($0.phone, $0.cursor, $0.answeredSync) })

        let databaseURL = try await PostgresCluster.shared.database()
        let copied = try await ChildProcess.run(binary, ["copy-data", "--from-data-dir", fixture.directory.path, "--to-database-url", databaseURL])
        #expect(copied.status == 0, "\(copied.output)")
        for line in ["devices            1", "commands           1", "episode_changes    2", "subscriptions      1", "events             2", "nonce_lease        1"] {
            #expect(copied.output.contains(line), "\(copied.output)")
        }
        // Analyzed with the copy: PostgreSQL knows how many devices there are (-1 or 0 until
        // tables are analyzed), so statements are planned for what is there.
        let psql = try #require(PostgresCluster.tool("psql"))
        let reltuples = try await ChildProcess.run(psql, ["-X", "-At", databaseURL, "-c", "SELECT reltuples FROM pg_class WHERE relname = 'devices'"])
        #expect(reltuples.output == "1", "\(reltuples.output)")
        // A second copy into the now filled database is refused.
        let again = try await ChildProcess.run(binary, ["copy-data", "--from-data-dir", fixture.directory.path, "--to-database-url", databaseURL])
        #expect(again.status != 0)
        #expect(again.output.contains("already holds data"), "\(again.output)")

        let node = try ChildProcess(binary, ["serve", "--port", "0", "--database-url", databaseURL])
        defer { node.terminate() }
        let output = try await node.waitForOutput(containing: "backplane: listening on", timeout: .seconds(60))
        #expect(!output.contains("FIRST RUN"), "the copied application was not found")
        let port = try #require(FirstRunOutput.port(in: output))
        let served = PostgresNodeTests.Node(process: node, port: port)
        // Signed again, as the SDK does, when refused as signed before the copied server's last lease.
        func device(_ method: HTTPRequest.Method, _ path: String, _ body: Data = Data()) async throws -> (Int, Data) {
            func send(at timestamp: Int64) async throws -> (Int, Data) {
                try await served.send(method, path, body: body, headers: fixture.signer.headers(
                    method: method, path: path, body: body, deviceId: phone.deviceId, credential: phone.credential, timestamp: timestamp))
            }
            let answer = try await send(at: Int64(Date().timeIntervalSince1970))
            guard let notBefore = try? WireJSON.decoder().decode(ErrorBody.self, from: answer.1).error.details?["notBefore"]?.intValue
            else { return answer }
            return try await send(at: notBefore)
        }

        // The SQLite server kept most nonces in memory: a sync it answered is refused here, as
        // signed before its last lease, which the copy carried.
        let (replayed, refusal) = try await served.send(.post, "/v1/sync", body: try Client.encode(SyncRequest()), headers: answeredSync)
        #expect(replayed == 401)
        #expect(try WireJSON.decoder().decode(ErrorBody.self, from: refusal).error.code == .staleTimestamp, "\(String(decoding: refusal, as: UTF8.self))")

        // The same credential syncs, and the finished command is not delivered again.
        let (synced, syncBody) = try await device(.post, "/v1/sync", try JSONEncoder().encode(SyncRequest()))
        #expect(synced == 200, "\(String(decoding: syncBody, as: UTF8.self))")
        #expect(try WireJSON.decoder().decode(SyncResponse.self, from: syncBody).commands.isEmpty)
        // No change is delivered again from the cursor; a new one comes with the next number.
        let (_, none) = try await device(.get, "/v1/subscriptions/changes?cursor=\(cursor)")
        #expect(try WireJSON.decoder().decode(EpisodeChanges.self, from: none).changes.isEmpty)
        var bearer = HTTPFields()
        bearer[.authorization] = "Bearer \(cms)"
        bearer[.contentType] = "application/json"
        let published = try await served.send(
            .post, "/v1/cms/feeds/show/episodes", body: try JSONEncoder().encode(PublishEpisodesRequest(episodes: [episode("e3")])), headers: bearer)
        #expect(published.0 == 200)
        let (_, next) = try await device(.get, "/v1/subscriptions/changes?cursor=\(cursor)")
        #expect(try WireJSON.decoder().decode(EpisodeChanges.self, from: next).changes.map(\.assetId) == ["e3"])
    }
}
