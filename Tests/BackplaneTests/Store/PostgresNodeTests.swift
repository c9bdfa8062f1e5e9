import Crypto
import Foundation
import HTTPTypes
import BackplaneWire
import Testing
import TestSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Two `backplane serve` processes (the built executable) on one PostgreSQL database, as two
/// nodes behind a load balancer: what one node accepted, the other knows.
@Suite(.serialized, .enabled(if: PostgresCluster.isAvailable, "PostgreSQL is not installed"))
struct PostgresNodeTests {
    /// A node: its process and where it listens.
    struct Node {
        let process: ChildProcess
        let port: Int

        func send(_ method: HTTPRequest.Method, _ path: String, body: Data = Data(), headers: HTTPFields) async throws -> (Int, Data) {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
            request.httpMethod = method.rawValue
            request.httpBody = body
            for field in headers { request.setValue(field.value, forHTTPHeaderField: field.name.rawName) }
            let (data, response) = try await URLSession.shared.data(for: request)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
        }
    }

    static func start(_ binary: URL, databaseURL: String, arguments: [String] = []) async throws -> (Node, output: String) {
        // Registration limits off: the device-limit test registers 256 devices of one user at once.
        let process = try ChildProcess(binary, [
            "serve", "--port", "0", "--database-url", databaseURL, "--registration-rate-limit", "0", "--user-registration-rate-limit", "0",
        ] + arguments)
        let output = try await process.waitForOutput(containing: "backplane: listening on", timeout: .seconds(60))
        return (Node(process: process, port: try #require(FirstRunOutput.port(in: output))), output)
    }

    @Test func twoNodesShareDevicesNoncesAndTheDeviceLimit() async throws {
        let binary = try #require(ExecutableTests.executable, "build the backplane product first")
        let databaseURL = try await PostgresCluster.shared.database()
        // The first node migrates the empty database and creates the first application.
        let (a, output) = try await Self.start(binary, databaseURL: databaseURL)
        defer { a.process.terminate() }
        #expect(output.contains("FIRST RUN"))
        let (signer, admin) = try Self.credentials(output)
        let (b, secondOutput) = try await Self.start(binary, databaseURL: databaseURL)
        defer { b.process.terminate() }
        #expect(!secondOutput.contains("FIRST RUN"))

        let limit = try JSONEncoder().encode(ApplicationSettingsUpdate { $0.deviceLimit = 3 })
        #expect(try await b.send(.patch, "/v1/admin/settings", body: limit, headers: admin).0 == 200)

        // A request accepted by node A is a replay at node B.
        let keys = DeviceKeys()
        let body = try Self.registration("phone", keys)
        let headers = signer.headers(method: .post, path: "/v1/devices/register", body: body, proofKey: keys.key(for: "phone"))
        #expect(try await a.send(.post, "/v1/devices/register", body: body, headers: headers).0 == 201)
        let (replayed, refusal) = try await b.send(.post, "/v1/devices/register", body: body, headers: headers)
        #expect(replayed == 401)
        #expect(try JSONDecoder().decode(ErrorBody.self, from: refusal).error.code == .nonceReused)

        // 256 registrations for one user, split across the nodes, all at once: the limit holds.
        let enabled = try await withThrowingTaskGroup(of: Bool.self) { group in
            for number in 0..<256 {
                group.addTask {
                    let device = "d\(number)"
                    let body = try Self.registration(device, keys)
                    let headers = signer.headers(method: .post, path: "/v1/devices/register", body: body, proofKey: keys.key(for: device))
                    let (status, data) = try await (number.isMultiple(of: 2) ? a : b).send(.post, "/v1/devices/register", body: body, headers: headers)
                    #expect(status == 201, "\(String(decoding: data, as: UTF8.self))")
                    return try WireJSON.decoder().decode(RegisterDeviceResponse.self, from: data).device.downloadEnabled
                }
            }
            return try await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
        }
        #expect(enabled == 2, "the phone holds one of the three places")
        let (_, listed) = try await a.send(.get, "/v1/admin/devices?userId=ann&limit=100", headers: admin)
        let page = try WireJSON.decoder().decode(DevicePage.self, from: listed)
        #expect(page.devices.count(where: \.downloadEnabled) <= 3)
    }

    @Test func aWipePostedToOneNodeWakesTheChannelOpenOnTheOther() async throws {
        let binary = try #require(ExecutableTests.executable, "build the backplane product first")
        let databaseURL = try await PostgresCluster.shared.database()
        let (a, output) = try await Self.start(binary, databaseURL: databaseURL)
        defer { a.process.terminate() }
        let (signer, admin) = try Self.credentials(output)
        let (b, _) = try await Self.start(binary, databaseURL: databaseURL)
        defer { b.process.terminate() }

        let keys = DeviceKeys()
        let body = try Self.registration("phone", keys)
        let (status, registered) = try await a.send(
            .post, "/v1/devices/register", body: body,
            headers: signer.headers(method: .post, path: "/v1/devices/register", body: body, proofKey: keys.key(for: "phone")))
        #expect(status == 201)
        let credential = try WireJSON.decoder().decode(RegisterDeviceResponse.self, from: registered).deviceCredential

        // The channel is open on node A.
        let channel = try await Self.openChannel(a, signer: signer, device: "phone", credential: credential)

        // The wipe goes to node B, which holds no channel of the phone.
        let wipe = try JSONEncoder().encode(EnqueueCommandRequest(type: .wipe, deviceId: "phone"))
        let started = ContinuousClock.now
        #expect(try await b.send(.post, "/v1/admin/commands", body: wipe, headers: admin).0 == 201)
        guard case .data(let woken) = await channel.read(timeout: 5) else {
            Issue.record("node A's channel was not woken")
            return
        }
        #expect(woken == WebSocketBytes.wakeUp)
        // What a loaded run may take (it took 1.08 s once beside the whole suite), well inside the
        // read's 5 s: the relay is a notification, not a poll, and a poll would miss this bound.
        #expect(ContinuousClock.now - started < .seconds(4), "the wake-up took \(ContinuousClock.now - started)")
    }

    @Test func theAdminCommandsWorkAgainstTheDatabase() async throws {
        let binary = try #require(ExecutableTests.executable, "build the backplane product first")
        let databaseURL = try await PostgresCluster.shared.database()
        let migrated = try await ChildProcess.run(binary, ["migrate", "--database-url", databaseURL])
        #expect(migrated.status == 0, "\(migrated.output)")
        #expect(migrated.output.contains("is up to date"))
        let created = try await ChildProcess.run(binary, ["app", "create", "--name", "Acme Video", "--database-url", databaseURL])
        let appId = try #require(FirstRunOutput.value(after: "application id :", in: created.output), "\(created.output)")
        let listed = try await ChildProcess.run(binary, ["app", "list", "--database-url", databaseURL])
        #expect(listed.output.contains("\(appId)\tAcme Video"))
        let token = try await ChildProcess.run(binary, ["token", "create", "--app", appId, "--scope", "cms", "--database-url", databaseURL])
        #expect(token.status == 0 && token.output.hasPrefix("bpt_"), "\(token.output)")

        // A URL that is not one is refused before anything starts.
        let bad = try await ChildProcess.run(binary, ["migrate", "--database-url", "mysql://x@y/z"])
        #expect(bad.status != 0)
        #expect(bad.output.contains("Invalid database URL"))
    }

    @Test func aNodeAnswers503WhilePostgreSQLIsDownAndWakesItsChannelsWhenItIsBack() async throws {
        let binary = try #require(ExecutableTests.executable, "build the backplane product first")
        let cluster = PostgresCluster()  // its own: this test stops the server
        let (node, output) = try await Self.start(binary, databaseURL: try await cluster.database())
        defer { node.process.terminate() }
        let (signer, admin) = try Self.credentials(output)
        let keys = DeviceKeys()
        let body = try Self.registration("phone", keys)
        let (_, registered) = try await node.send(
            .post, "/v1/devices/register", body: body,
            headers: signer.headers(method: .post, path: "/v1/devices/register", body: body, proofKey: keys.key(for: "phone")))
        let credential = try WireJSON.decoder().decode(RegisterDeviceResponse.self, from: registered).deviceCredential
        let channel = try await Self.openChannel(node, signer: signer, device: "phone", credential: credential)

        try await cluster.stopServer()
        // Refused with 503 and the error body within the wait for a connection, not left hanging.
        let asked = ContinuousClock.now
        let (status, refusal) = try await node.send(.get, "/v1/admin/devices", headers: admin)
        #expect(status == 503)
        #expect(try JSONDecoder().decode(ErrorBody.self, from: refusal).error.code == .serviceUnavailable)
        #expect(ContinuousClock.now - asked < .seconds(15))
        #expect(try await node.send(.get, "/readyz", headers: HTTPFields()).0 == 503)
        // Both say when to come back.
        for path in ["/readyz", "/v1/admin/devices"] {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(node.port)\(path)")!)
            for field in admin { request.setValue(field.value, forHTTPHeaderField: field.name.rawName) }
            let (_, answer) = try await URLSession.shared.data(for: request)
            #expect((answer as? HTTPURLResponse)?.value(forHTTPHeaderField: "Retry-After") == "2", "\(path)")
        }

        try await cluster.startServer()
        let deadline = ContinuousClock.now + .seconds(30)
        var answered = 0
        while ContinuousClock.now < deadline {
            answered = try await node.send(.get, "/v1/admin/devices", headers: admin).0
            if answered == 200 { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(answered == 200, "the node did not recover")
        // Wake-ups sent while it was not listening are lost: its channels are woken once instead.
        guard case .data(let woken) = await channel.read(timeout: 30) else {
            Issue.record("the channel was not woken after the listener reconnected")
            return
        }
        #expect(woken == WebSocketBytes.wakeUp)
    }

    /// The app key and an admin token's headers, from a first run's banner.
    static func credentials(_ output: String) throws -> (Signer, admin: HTTPFields) {
        let signer = Signer(
            keyId: try #require(FirstRunOutput.value(after: "app key id     :", in: output)),
            secret: try #require(FirstRunOutput.value(after: "app key secret :", in: output)))
        var admin = HTTPFields()
        admin[.authorization] = "Bearer \(try #require(FirstRunOutput.value(after: "admin token    :", in: output)))"
        admin[.contentType] = "application/json"
        return (signer, admin)
    }

    /// Opens `device`'s channel on `node` and reads past the 101 and the first wake-up.
    static func openChannel(_ node: Node, signer: Signer, device: String, credential: String) async throws -> RawConnection {
        let path = "/v1/devices/\(device)/channel"
        var upgrade = "GET \(path) HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        for field in signer.headers(method: .get, path: path, body: Data(), deviceId: device, credential: credential)
        where field.name != .contentType { upgrade += "\(field.name.rawName): \(field.value)\r\n" }
        let channel = try RawConnection(port: node.port, sending: upgrade + "\r\n")
        let switched = try #require(await channel.readResponse(timeout: 15))
        #expect(switched.status == 101)
        var first = switched.body
        while first.count < 6, case .data(let more) = await channel.read(timeout: 15) { first += more }
        #expect(first == WebSocketBytes.wakeUp)
        return channel
    }

    static func registration(_ device: String, _ keys: DeviceKeys) throws -> Data {
        try JSONEncoder().encode(RegisterDeviceRequest(
            userId: "ann", deviceId: device, platform: "linux", devicePublicKey: DeviceKeys.publicKey(keys.key(for: device))))
    }
}
