import Backplane
import Foundation
import HTTPTypes
import Synchronization
import BackplaneWire
import Testing
import TestSupport

/// The outage of issue 49: registrations whose key sets trickle in, on a node with 20
/// connections, made `/healthz` and the admin API unanswerable for every tenant. Now at most a
/// quarter of the node's connections wait for key sets, each for one deadline, and the node
/// answers everything else meanwhile. The node is the built `backplane serve`, in a process of
/// its own as in production: what answers is its own threads, not this busy test process's.
@Suite(.serialized, .timeLimit(.minutes(2)), .enabled(if: FaultTests.requested, Comment(rawValue: FaultTests.skipReason)))
struct UserTokenURLLoadTests {
    @Test func slowKeySetsLeaveTheNodeAnsweringItsOtherRequests() async throws {
        let binary = try #require(ExecutableTests.executable, "build the backplane product first")
        try await UserTokenURLLimitTests.withSlowHost(.trickling(every: .milliseconds(300))) { certificates, host in
            let root = try createdTemporaryDirectory("backplane-jwks-load")
            defer { try? FileManager.default.removeItem(at: root) }
            let maxConnections = 20
            // The fetches' deadline is long here, so that a loaded machine has time to ask the node
            // while they are still in flight.
            let node = try ChildProcess(binary, [
                "serve", "--port", "0", "--data-dir", root.appendingPathComponent("server").path,
                "--max-connections", "\(maxConnections)", "--allow-jwks-url", "--jwks-ca-file", certificates.authority.path,
                "--jwks-timeout-seconds", "20", "--registration-rate-limit", "0", "--user-registration-rate-limit", "0",
                "--address-rate-limit", "0",
            ])
            defer { node.terminate() }
            let banner = try await node.waitForOutput(containing: "backplane: listening on", timeout: .seconds(60))
            let port = try #require(FirstRunOutput.port(in: banner))
            let signer = Signer(
                keyId: try #require(FirstRunOutput.value(after: "app key id     :", in: banner)),
                secret: try #require(FirstRunOutput.value(after: "app key secret :", in: banner)))
            let admin = try #require(FirstRunOutput.value(after: "admin token    :", in: banner))

            let issuer = TokenIssuer()
            let configuration = try Client.encode(issuer.configuration(jwksUrl: "https://127.0.0.1:\(host.port)/jwks.json"))
            let configured = try RawConnection(port: port, sending: Data((
                "PUT /v1/admin/user-identity HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(admin)\r\nContent-Type: application/json\r\n"
                    + "Content-Length: \(configuration.count)\r\nConnection: close\r\n\r\n").utf8) + configuration)
            #expect(await configured.converse { $0.readResponse(timeout: 15)?.status } == 200)
            configured.disconnect()

            let token = try await issuer.es256Token(TokenIssuer.claims(user: "alice"))
            let keys = DeviceKeys()
            let requests = (0..<25).map { Self.registration(signer: signer, keys: keys, device: "d\($0)", token: token) }
            let waitingCap = UserTokenOptions.waitingLimit(maxConnections: maxConnections)
            let answered = Count()
            let registrations = Task {
                await withTaskGroup(of: Int?.self) { group in
                    for request in requests {
                        group.addTask {
                            guard let connection = try? RawConnection(port: port, sending: request) else { return nil }
                            defer { connection.disconnect() }
                            // A thread each: 25 reads blocked on GCD's few threads would starve the
                            // Swift pool that this test runs on.
                            let status = await connection.converse { $0.readResponse(timeout: 60)?.status }
                            answered.add()
                            return status
                        }
                    }
                    return await group.reduce(into: [Int?]()) { $0.append($1) }
                }
            }
            // All but the registrations the cap lets wait are refused at once; those wait for
            // the one fetch, which trickles.
            let deadline = ContinuousClock.now + .seconds(60)
            while host.accepted < 1 || answered.value < requests.count - waitingCap, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            try #require(host.accepted >= 1, "no key set was fetched")
            #expect(answered.value >= requests.count - waitingCap, "registrations beyond the cap were not refused at once")

            // While the fetch trickles: every other request is answered within 2 s.
            for path in ["/healthz", "/v1/admin/user-identity"] {
                let request = "GET \(path) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(admin)\r\nConnection: close\r\n\r\n"
                let connection = try RawConnection(port: port, sending: request)
                let answer = await connection.converse { $0.readResponse(timeout: 2) }
                connection.disconnect()
                #expect(answer?.status == 200, "\(path) was not answered within 2 s while key sets trickled in")
            }
            #expect(host.open >= 1, "the fetch had ended before the node was asked: this tested nothing")

            let statuses = await registrations.value
            #expect(statuses.allSatisfy { $0 == 503 }, "every registration is refused, none left unanswered: \(statuses)")
            #expect(host.accepted == 1, "one fetch for the URL, not \(host.accepted)")
            #expect(await host.openAfterWaiting(upTo: 5) == 0, "a key-set fetch outlived its deadline")
        }
    }

    /// A signed registration carrying a user token, as raw bytes. Closed by the node once
    /// answered: a refused registration's slot is free again however late this test's own
    /// threads get to close their end on a loaded machine.
    static func registration(signer: Signer, keys: DeviceKeys, device: String, token: String) -> Data {
        let key = keys.key(for: device)
        let body = try! Client.encode(RegisterDeviceRequest(
            userId: "alice", deviceId: device, platform: "linux", devicePublicKey: DeviceKeys.publicKey(key)))
        var request = "POST /v1/devices/register HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: \(body.count)\r\n\(UserToken.header): \(token)\r\n"
        for field in signer.headers(method: .post, path: "/v1/devices/register", body: body, proofKey: key) {
            request += "\(field.name.rawName): \(field.value)\r\n"
        }
        return Data((request + "\r\n").utf8) + body
    }
}

/// A count that concurrent tasks add to.
private final class Count: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func add() { count.withLock { $0 += 1 } }
}
