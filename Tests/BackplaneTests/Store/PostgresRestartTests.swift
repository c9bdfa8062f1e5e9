import Backplane
import Foundation
import HTTPTypes
import Logging
import BackplaneWire
import Synchronization
import Testing
import TestSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Two `backplane serve` nodes on one PostgreSQL, with registrations, syncs and event batches
/// running against both, while PostgreSQL is restarted under them: `pg_ctl restart -m fast`,
/// then an outage ended by a clean stop and one ended by `-m immediate` (a crash), each held
/// for a while. Nodes answer 503 with `Retry-After` (never 500, never late) while it is away,
/// serve again within 5 s of its return without a restart of their own, relay wake-ups again,
/// and lose nothing they acknowledged.
@Suite(
    .serialized, .enabled(if: FaultTests.requested, Comment(rawValue: FaultTests.skipReason)),
    .enabled(if: PostgresCluster.isAvailable, "PostgreSQL is not installed"))
struct PostgresRestartTests {
    /// How long a request may take, at worst, while the database is away or restarting: the
    /// wait for a pooled connection (5 s), the limit on a call's use of it (10 s), and some room
    /// for a loaded machine.
    static let longestAnswer: Duration = .seconds(17)
    /// How soon after the database is back every node must serve.
    static let recovery: Duration = .seconds(5)

    static func step(_ text: String) {
        FileHandle.standardError.write(Data("PostgresRestartTests: \(text)\n".utf8))
    }

    @Test func twoNodesRideOutRestartsUnderLoadAndLoseNothingAcknowledged() async throws {
        let binary = try #require(ExecutableTests.executable, "build the backplane product first")
        let cluster = PostgresCluster()  // its own: this test stops the server
        let databaseURL = try await cluster.database()
        // The device rate limit off: one device's syncs and uploads are the load.
        let (a, output) = try await PostgresNodeTests.start(binary, databaseURL: databaseURL, arguments: ["--device-rate-limit", "0"])
        defer { a.process.terminate() }
        let (b, _) = try await PostgresNodeTests.start(binary, databaseURL: databaseURL, arguments: ["--device-rate-limit", "0"])
        defer { b.process.terminate() }
        let (signer, admin) = try PostgresNodeTests.credentials(output)
        let applicationId = try #require(FirstRunOutput.value(after: "application id :", in: output))
        let keys = DeviceKeys()
        let uploader = try await Self.register("uploader", user: "ann", on: a, signer: signer, keys: keys)
        let watcher = try await Self.register("watcher", user: "ann", on: a, signer: signer, keys: keys)

        let load = Load(nodes: [a, b], signer: signer, keys: keys, uploader: uploader)
        let running = Task { await load.run() }

        let outages = [Outage.restart, .stopped(.fast), .stopped(.immediate)]
        var recoveries: [String] = []
        for (round, outage) in outages.enumerated() {
            // A channel on node A, open across the outage.
            let channel = try await PostgresNodeTests.openChannel(a, signer: signer, device: "watcher", credential: watcher)
            let before = load.acknowledged
            try await load.waitUntil { $0.acknowledged >= before + 20 }

            switch outage {
            case .restart:
                try await cluster.restartServer(.fast)
            case .stopped(let mode):
                try await cluster.stopServer(mode)
                // While it is away, each node refuses at once, as the load also sees.
                for node in [a, b] {
                    let ready = try await Self.send(node, .get, "/readyz")
                    #expect(ready.status == 503, "\(outage): /readyz on :\(node.port) answered \(ready.status)")
                    // The node caps its probe at 2 s (`PostgresStore.isReachable`); what this guards
                    // against is a probe that hangs (30 s here, the client's limit). 8 s leaves room
                    // for the kill and load tests that share the two cores: CI measured 5.4 s once.
                    #expect(ready.elapsed < .seconds(8), "\(outage): /readyz took \(ready.elapsed)")
                    let body = try JSONEncoder().encode(SyncRequest())
                    let sync = try await Self.send(node, .post, "/v1/sync", body: body,
                        headers: signer.headers(method: .post, path: "/v1/sync", body: body, deviceId: "uploader", credential: uploader))
                    #expect(sync.status == 503, "\(outage): a sync on :\(node.port) answered \(sync.status)")
                    #expect(sync.retryAfter.map { $0 >= 1 } == true, "\(outage): a 503 without Retry-After")
                    #expect(try JSONDecoder().decode(ErrorBody.self, from: sync.body).error.code == .serviceUnavailable)
                }
                try await load.waitUntil { $0.unavailable > 0 }
                try await cluster.startServer()
            }

            // Every node serves again within 5 s of the database's return, without a restart.
            let back = ContinuousClock.now
            for node in [a, b] {
                var answered = 0
                while ContinuousClock.now - back < .seconds(30) {
                    answered = (try? await Self.send(node, .get, "/readyz").status) ?? 0
                    if answered == 200 { break }
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(answered == 200, "\(outage): node :\(node.port) did not serve again")
            }
            let recovered = ContinuousClock.now - back
            #expect(recovered <= Self.recovery, "\(outage): the nodes served again \(recovered) after the database's return")
            let served = load.acknowledged
            try await load.waitUntil { $0.acknowledged > served + 10 }

            // Node A listens again (it wakes its channels once then), and a command posted to
            // node B reaches its channel through PostgreSQL's NOTIFY.
            #expect(await Self.wakeUps(channel, within: 10) > 0, "\(outage): node A did not wake its channel on listening again")
            _ = await Self.wakeUps(channel, within: 0.5)
            // (A wipe, last: it ends the watcher.)
            let type: CommandType = round == outages.count - 1 ? .wipe : .syncNow
            let command = try JSONEncoder().encode(EnqueueCommandRequest(type: type, deviceId: "watcher"))
            let posted = try await Self.send(b, .post, "/v1/admin/commands", body: command, headers: admin)
            #expect(posted.status == 201, "\(outage): \(String(decoding: posted.body, as: UTF8.self))")
            #expect(await Self.wakeUps(channel, within: 5) > 0, "\(outage): a command posted to node B did not reach node A's channel")
            channel.disconnect()
            Self.step("\(outage): nodes served again \(recovered) after the database's return")
            recoveries.append("\(outage): \(recovered.formatted(.units(allowed: [.seconds], fractionalPart: .show(length: 2))))")
        }

        load.stop()
        for node in [a, b] {
            // The nodes' errors (not their warnings of 503s), to read when something failed.
            for line in node.process.output.split(separator: "\n") where line.split(separator: " ").dropFirst().first == "error" {
                Self.step(":\(node.port) \(line)")
            }
        }
        await running.value
        let record = load.snapshot
        #expect(record.unexpected.isEmpty, "answers that are neither success nor 503: \(record.unexpected.prefix(10))")
        #expect(record.unavailableWithoutRetryAfter == 0, "\(record.unavailableWithoutRetryAfter) answers 503 without Retry-After")
        #expect(record.slowest < Self.longestAnswer, "an answer took \(record.slowest)")
        #expect(record.unavailable > 0, "no request met the outages")
        let summary = "\(record.registered.count) registrations and \(record.events.count) events acknowledged, \(record.syncs) syncs, \(record.unavailable) answers 503, slowest \(record.slowest)"
        Self.step(summary)

        // Everything acknowledged is in the database.
        try await PostgresStore.withStore(try PostgresURL(databaseURL).configuration, logger: Logger(label: "restart-test")) { store in
            for device in record.registered {
                #expect(try await store.device(applicationId: applicationId, deviceId: device) != nil, "registration of \(device) acknowledged and lost")
            }
            let stored = try await store.events(applicationId: applicationId, filter: EventFilter(deviceId: "uploader"), after: nil, limit: 100_000)
            let missing = record.events.subtracting(stored.map(\.event.sequence))
            #expect(missing.isEmpty, "\(missing.count) acknowledged events lost, e.g. \(missing.sorted().prefix(5))")
        }
        // CI checks that this test ran (.ci/run).
        PostgresCluster.report("restarts under load: \(summary); served again after \(recoveries.joined(separator: ", "))")
    }

    enum Outage: CustomStringConvertible {
        case restart
        case stopped(PostgresCluster.StopMode)

        var description: String {
            switch self {
            case .restart: "pg_ctl restart -m fast"
            case .stopped(let mode): "an outage ended by -m \(mode.rawValue)"
            }
        }
    }

    /// Registers `device` and gives its credential.
    static func register(_ device: String, user: String, on node: PostgresNodeTests.Node, signer: Signer, keys: DeviceKeys) async throws -> String {
        let body = try JSONEncoder().encode(RegisterDeviceRequest(
            userId: user, deviceId: device, platform: "linux", devicePublicKey: DeviceKeys.publicKey(keys.key(for: device))))
        let answer = try await send(node, .post, "/v1/devices/register", body: body,
            headers: signer.headers(method: .post, path: "/v1/devices/register", body: body, proofKey: keys.key(for: device)))
        try #require(answer.status == 201, "\(String(decoding: answer.body, as: UTF8.self))")
        return try WireJSON.decoder().decode(RegisterDeviceResponse.self, from: answer.body).deviceCredential
    }

    struct Answer {
        var status: Int
        var retryAfter: Int?
        var body: Data
        var elapsed: Duration
    }

    /// One request; a connection that fails or a timeout (30 s) is status 0.
    static func send(
        _ node: PostgresNodeTests.Node, _ method: HTTPRequest.Method, _ path: String, body: Data = Data(), headers: HTTPFields = [:]
    ) async throws -> Answer {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(node.port)\(path)")!)
        request.httpMethod = method.rawValue
        request.httpBody = body
        request.timeoutInterval = 30
        for field in headers { request.setValue(field.value, forHTTPHeaderField: field.name.rawName) }
        let started = ContinuousClock.now
        do {
            let (data, response) = try await URLSession.shared.data(for: request)
            let http = response as? HTTPURLResponse
            return Answer(
                status: http?.statusCode ?? 0, retryAfter: (http?.value(forHTTPHeaderField: "Retry-After")).flatMap { Int($0) },
                body: data, elapsed: ContinuousClock.now - started)
        } catch {
            return Answer(status: 0, retryAfter: nil, body: Data("\(error)".utf8), elapsed: ContinuousClock.now - started)
        }
    }

    /// How many wake-up frames arrive on `channel` within `seconds`.
    static func wakeUps(_ channel: RawConnection, within seconds: TimeInterval) async -> Int {
        var received = Data()
        let deadline = Date().addingTimeInterval(seconds)
        while received.isEmpty || received.count % WebSocketBytes.wakeUp.count != 0 {
            let left = deadline.timeIntervalSinceNow
            guard left > 0, case .data(let more) = await channel.read(timeout: left) else { break }
            received += more
        }
        return received.count / WebSocketBytes.wakeUp.count
    }

    /// Registrations, syncs and event batches against the nodes in turn, until stopped; what was
    /// acknowledged and what else was answered.
    final class Load: Sendable {
        struct Record {
            var registered: [String] = []
            var events: Set<Int64> = []
            var syncs = 0
            var unavailable = 0
            var unavailableWithoutRetryAfter = 0
            var unexpected: [String] = []
            var slowest: Duration = .zero
            var acknowledged: Int { registered.count + events.count / 10 + syncs }
        }

        let nodes: [PostgresNodeTests.Node]
        let signer: Signer
        let keys: DeviceKeys
        let uploader: String
        private let record = Mutex(Record())
        private let stopped = Atomic(false)

        init(nodes: [PostgresNodeTests.Node], signer: Signer, keys: DeviceKeys, uploader: String) {
            self.nodes = nodes
            self.signer = signer
            self.keys = keys
            self.uploader = uploader
        }

        var snapshot: Record { record.withLock { $0 } }
        var acknowledged: Int { snapshot.acknowledged }
        func stop() { stopped.store(true, ordering: .relaxed) }

        func waitUntil(_ condition: (Record) -> Bool) async throws {
            let deadline = ContinuousClock.now + .seconds(60)
            while !condition(snapshot) {
                try #require(ContinuousClock.now < deadline, "the load made no progress: \(snapshot.acknowledged) acknowledged")
                try await Task.sleep(for: .milliseconds(20))
            }
        }

        func run() async {
            await withDiscardingTaskGroup { group in
                group.addTask { await self.registrations() }
                group.addTask { await self.eventBatches() }
                group.addTask { await self.syncs() }
            }
        }

        /// Counts an answer: true when it was a success.
        private func note(_ answer: Answer, success: Int, _ what: String) -> Bool {
            record.withLock { record in
                record.slowest = max(record.slowest, answer.elapsed)
                switch answer.status {
                case success:
                    return true
                case 503:
                    record.unavailable += 1
                    if (answer.retryAfter ?? 0) < 1 { record.unavailableWithoutRetryAfter += 1 }
                default:
                    record.unexpected.append("\(what): \(answer.status) \(String(decoding: answer.body.prefix(300), as: UTF8.self))")
                }
                return false
            }
        }

        private func registrations() async {
            var number = 0
            while !stopped.load(ordering: .relaxed) {
                number += 1
                let device = "r\(number)"
                guard let body = try? JSONEncoder().encode(RegisterDeviceRequest(
                    userId: "u\(number)", deviceId: device, platform: "linux", devicePublicKey: DeviceKeys.publicKey(keys.key(for: device))))
                else { return }
                let headers = signer.headers(method: .post, path: "/v1/devices/register", body: body, proofKey: keys.key(for: device))
                guard let answer = try? await send(nodes[number % nodes.count], .post, "/v1/devices/register", body: body, headers: headers) else { return }
                if note(answer, success: 201, "registration \(device)") { record.withLock { $0.registered.append(device) } }
            }
        }

        private func eventBatches() async {
            var sequence: Int64 = 0
            var turn = 0
            while !stopped.load(ordering: .relaxed) {
                turn += 1
                let events = (0..<10).map { _ in
                    sequence += 1
                    return EventTests.event(sequence, .custom(name: "load", number: Double(sequence)), user: "ann")
                }
                guard let body = try? WireJSON.encoder().encode(EventBatch(sentAt: Date(), events: events)) else { return }
                let headers = signer.headers(method: .post, path: "/v1/events", body: body, deviceId: "uploader", credential: uploader)
                guard let answer = try? await send(nodes[turn % nodes.count], .post, "/v1/events", body: body, headers: headers) else { return }
                guard note(answer, success: 200, "event batch") else { continue }
                guard let results = try? WireJSON.decoder().decode(EventBatchResponse.self, from: answer.body).results else {
                    record.withLock { $0.unexpected.append("event batch: an answer that does not decode") }
                    continue
                }
                let accepted = results.filter { $0.status == .accepted }.compactMap(\.sequence)
                if accepted.count != events.count {
                    record.withLock { $0.unexpected.append("event batch: \(events.count - accepted.count) events not accepted: \(results)") }
                }
                record.withLock { $0.events.formUnion(accepted) }
            }
        }

        private func syncs() async {
            var turn = 0
            while !stopped.load(ordering: .relaxed) {
                turn += 1
                guard let body = try? JSONEncoder().encode(SyncRequest()) else { return }
                let headers = signer.headers(method: .post, path: "/v1/sync", body: body, deviceId: "uploader", credential: uploader)
                guard let answer = try? await send(nodes[turn % nodes.count], .post, "/v1/sync", body: body, headers: headers) else { return }
                if note(answer, success: 200, "sync") { record.withLock { $0.syncs += 1 } }
            }
        }
    }
}
