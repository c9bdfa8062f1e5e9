import Backplane
import ClientSDK
import Foundation
import Logging
import BackplaneWire
import Testing
import TestSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Two built `backplane serve` nodes on one PostgreSQL database, one killed with SIGKILL while
/// the SDK uploads to it; the SDK then goes on through the other, as a load balancer would send it.
@Suite(.serialized, .enabled(if: PostgresCluster.isAvailable, "PostgreSQL is not installed"))
struct PostgresFailoverTests {
    @Test func aNodeKilledDuringAnEventLoadLosesNothingAcknowledgedAndTheOtherNodeTakesTheRest() async throws {
        let binary = try #require(BuiltProduct.url(named: "backplane"), "build the backplane product first")
        let databaseURL = try await PostgresCluster.shared.database()
        let a = try ChildProcess(binary, ["serve", "--port", "0", "--database-url", databaseURL])
        defer { a.terminate() }
        let output = try await a.waitForOutput(containing: "backplane: listening on", timeout: .seconds(60))
        let b = try ChildProcess(binary, ["serve", "--port", "0", "--database-url", databaseURL])
        defer { b.terminate() }
        let portB = try #require(FirstRunOutput.port(in: try await b.waitForOutput(containing: "backplane: listening on", timeout: .seconds(60))))
        let portA = try #require(FirstRunOutput.port(in: output))
        let applicationId = try #require(FirstRunOutput.value(after: "application id :", in: output))
        let keyId = try #require(FirstRunOutput.value(after: "app key id     :", in: output))
        let secret = try #require(FirstRunOutput.value(after: "app key secret :", in: output))

        // The test reads the shared database itself.
        // The test's own reader, polling while a node dies, waits longer for a connection than a
        // node's request would: in CI's full suite one read waited past 5 s on the loaded machine.
        try await PostgresStore.withStore(
            try PostgresURL(databaseURL).configuration, logger: Logger(label: "failover-test"), leaseTimeout: .seconds(30)
        ) { reader in
            func storedLoad() async throws -> [EventRecord] {
                try await reader.events(applicationId: applicationId, filter: EventFilter(type: .custom), after: nil, limit: 10_000)
            }
            let total = 1500
            let sdk = temporaryDirectory("backplane-failover-sdk")
            defer { try? FileManager.default.removeItem(at: sdk) }
            func engine(port: Int) -> BackplaneEngine {
                BackplaneEngine(configuration: BackplaneClientConfiguration(
                    backplaneURL: URL(string: "http://127.0.0.1:\(port)")!, appKeyId: keyId, appKeySecret: secret,
                    userId: "loader", dataDirectory: sdk,
                    sync: SyncOptions(
                        interval: .seconds(3600), retry: RetryPolicy(initial: .milliseconds(100), maximum: .milliseconds(500)),
                        requestTimeout: .seconds(3), useWakeUpChannel: false),
                    eventLog: EventLogOptions(batchSize: 20, uploadThreshold: 20)))
            }
            let first = engine(port: portA)
            for index in 1...total { try first.eventLogger.log(.custom(name: "load", number: Double(index))) }
            try await first.start()

            // Kill -9 node A as soon as the load is under way.
            var storedAtKill = 0
            let deadline = ContinuousClock.now + .seconds(30)
            while storedAtKill == 0, ContinuousClock.now < deadline {
                storedAtKill = try await storedLoad().count
                if storedAtKill == 0 { try await Task.sleep(for: .milliseconds(2)) }
            }
            a.signal(SIGKILL)
            _ = try await a.waitForExit(timeout: .seconds(10))
            #expect(storedAtKill > 0 && storedAtKill < total, "the kill did not land in the middle of the load: \(storedAtKill) of \(total)")
            let queuedAtKill = try first.eventLogger.queuedCount()
            await first.shutdown()
            #expect(try await storedLoad().count >= total - queuedAtKill, "acknowledged events were lost")

            // Node B serves on; the device's next requests go there.
            let (_, health) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(portB)/readyz")!)
            #expect((health as? HTTPURLResponse)?.statusCode == 200)
            let second = engine(port: portB)
            try await second.start()
            let drained = ContinuousClock.now + .seconds(60)
            while try second.eventLogger.queuedCount() > 0, ContinuousClock.now < drained {
                try await Task.sleep(for: .milliseconds(50))
            }
            await second.shutdown()
            let stored = try await storedLoad()
            #expect(stored.count == total)
            #expect(Set(stored.map(\.event.sequence)).count == total)
            #expect(Set(stored.compactMap(\.event.content.customNumber)) == Set((1...total).map(Double.init)))
        }
    }
}
