import Backplane
import Foundation
import GRDB
import BackplaneWire
import Synchronization
import Testing
import TestSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `backplane backup` while events pour in, `backplane restore`, and a server on the restored
/// directory: the built executable, as an operator runs it.
@Suite(.serialized) struct BackupTests {
    static let batchSize = 10

    @Test func aBackupTakenDuringAnEventLoadRestoresToAServerWithTheSameDevicesCommandsAndEvents() async throws {
        let binary = try #require(BuiltProduct.url(named: "backplane"), "build the backplane product first")
        let fixture = try await Fixture.make()
        let work = temporaryDirectory("backplane-backup")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let backup = work.appendingPathComponent("nightly.sqlite")
        let restored = work.appendingPathComponent("restored")

        let reporting = try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .reporting, name: "r")
        let acknowledged = Mutex((before: 0, sentBy: 0))
        try await fixture.test { client in
            var devices: [DeviceIdentity] = []
            for name in ["phone", "tablet", "laptop"] { devices.append(try await client.register(user: "alice", device: name).0) }
            let wipe = try await client.admin(.post, "/v1/admin/commands", json: EnqueueCommandRequest(type: .wipe, deviceId: "tablet"))
            #expect(wipe.status == .created)

            // Batches of ten events, each in one transaction, until told to stop.
            let accepted = Atomic(0)
            // Counted before each batch goes out: a batch can be committed, and so be in a
            // backup, before its answer is counted as accepted.
            let sent = Atomic(0)
            let stop = Atomic(false)
            let load = Task {
                var sequence: Int64 = 0
                while !stop.load(ordering: .relaxed) {
                    let events = (0..<Self.batchSize).map { _ in
                        sequence += 1
                        return EventTests.event(sequence, .playStart(assetId: "a\(sequence)"))
                    }
                    sent.add(events.count, ordering: .relaxed)
                    let answer = try await client.device(.post, "/v1/events", json: EventBatch(sentAt: Date(), events: events), as: devices[0])
                    let results = try answer.decode(EventBatchResponse.self).results
                    accepted.add(results.count { $0.status == .accepted }, ordering: .relaxed)
                }
            }
            while accepted.load(ordering: .relaxed) < 200 { try await Task.sleep(for: .milliseconds(10)) }
            // A backup is quick: on a loaded machine the load may not get a batch in while one
            // runs. Until one does, the backup is taken again (each to a new file).
            var before = 0, after = 0, sentBy = 0
            for attempt in 1...10 where after <= before {
                try? FileManager.default.removeItem(at: backup)
                before = accepted.load(ordering: .relaxed)
                let backedUp = try await ChildProcess.run(binary, ["backup", "--to", backup.path, "--data-dir", fixture.directory.path])
                after = accepted.load(ordering: .relaxed)
                sentBy = sent.load(ordering: .relaxed)
                try #require(backedUp.status == 0, "attempt \(attempt): \(backedUp.output)")
                #expect(backedUp.output.contains("devices 3"))
            }
            stop.store(true, ordering: .relaxed)
            try await load.value
            let mode = try FileManager.default.attributesOfItem(atPath: backup.path)[.posixPermissions] as? Int
            #expect(mode == 0o600)
            #expect(after > before, "the load never ran during a backup")

            let restore = try await ChildProcess.run(binary, ["restore", "--from", backup.path, "--data-dir", restored.path])
            #expect(restore.status == 0, "\(restore.output)")
            acknowledged.withLock { $0 = (before, sentBy) }
        }

        // A server on the restored directory serves the devices, the command and the events.
        let server = try ChildProcess(binary, ["serve", "--port", "0", "--data-dir", restored.path])
        defer { server.terminate() }
        let output = try await server.waitForOutput(containing: "backplane: listening on", timeout: .seconds(60))
        #expect(!output.contains("FIRST RUN"))
        let port = try #require(FirstRunOutput.port(in: output))
        let listed: DevicePage = try await Self.get(port, "/v1/admin/devices", token: fixture.adminToken)
        #expect(Set(listed.devices.map(\.deviceId)) == ["phone", "tablet", "laptop"])
        let commands: CommandList = try await Self.get(port, "/v1/admin/devices/tablet/commands", token: fixture.adminToken)
        #expect(commands.commands.map(\.type) == [.wipe])
        // One commit's view: only whole batches, at least what was acknowledged before it began,
        // at most what had been sent when it ended.
        let counts: EventCounts = try await Self.get(port, "/v1/reports/events/counts", token: reporting)
        let events = counts.counts.reduce(0) { $0 + $1.count }
        let (before, sentBy) = acknowledged.withLock { $0 }
        #expect(events % Self.batchSize == 0)
        #expect((before...sentBy).contains(events), "\(events) events, acknowledged \(before) before, sent \(sentBy) by the end")
        // A token made after the backup is unknown to the restored server.
        let later = try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .reporting, name: "later")
        #expect(try await Self.status(port, "/v1/reports/events", token: later) == 401)

        // A live directory is not restored over.
        let refused = try await ChildProcess.run(binary, ["restore", "--from", backup.path, "--data-dir", restored.path])
        #expect(refused.status != 0)
        #expect(refused.output.contains("in use by a running backplane"))
    }

    @Test func restoreKeepsTheDatabaseItReplacesAndRefusesABackupFromANewerVersion() async throws {
        let binary = try #require(BuiltProduct.url(named: "backplane"), "build the backplane product first")
        let fixture = try await Fixture.make()
        let work = temporaryDirectory("backplane-restore")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer {
            try? FileManager.default.removeItem(at: work)
            try? FileManager.default.removeItem(at: fixture.directory)
        }
        let backup = work.appendingPathComponent("backup.sqlite"), target = work.appendingPathComponent("data")
        #expect(try await ChildProcess.run(binary, ["backup", "--to", backup.path, "--data-dir", fixture.directory.path]).status == 0)
        #expect(try await ChildProcess.run(binary, ["restore", "--from", backup.path, "--data-dir", target.path]).status == 0)

        // Restoring over a database keeps it, renamed, where it was.
        let again = try await ChildProcess.run(binary, ["restore", "--from", backup.path, "--data-dir", target.path])
        #expect(again.status == 0, "\(again.output)")
        let kept = try FileManager.default.contentsOfDirectory(atPath: target.path).filter { $0.hasPrefix("backplane.sqlite.before-restore-") }
        #expect(kept.count == 1, "\(kept)")
        #expect(again.output.contains("kept as"))

        // A backup that a newer version wrote (a migration this one does not know) is refused and
        // nothing is replaced.
        try await DatabaseQueue(path: backup.path).write { db in
            try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99: from a later version')")
        }
        let before = try Data(contentsOf: target.appendingPathComponent("backplane.sqlite"))
        let newer = try await ChildProcess.run(binary, ["restore", "--from", backup.path, "--data-dir", target.path])
        #expect(newer.status != 0)
        #expect(newer.output.contains("newer backplane"))
        #expect(try Data(contentsOf: target.appendingPathComponent("backplane.sqlite")) == before)
        #expect(!FileManager.default.fileExists(atPath: target.appendingPathComponent("backplane.sqlite.restoring").path))
    }

    static func get<T: Decodable>(_ port: Int, _ path: String, token: String) async throws -> T {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        try #require((response as? HTTPURLResponse)?.statusCode == 200, "\(path): \(String(decoding: data, as: UTF8.self))")
        return try WireJSON.decoder().decode(T.self, from: data)
    }

    static func status(_ port: Int, _ path: String, token: String) async throws -> Int {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        return (try await URLSession.shared.data(for: request).1 as? HTTPURLResponse)?.statusCode ?? 0
    }
}
