import Backplane
import Foundation
import Synchronization
import HTTPTypes
import BackplaneWire
import Testing
import TestSupport

/// The outage of issue 49: registrations whose key sets trickle in, on a node with 20
/// connections, made `/healthz` and the admin API unanswerable for every tenant. Now at most a
/// quarter of the node's connections wait for key sets, each for one deadline, and the node
/// answers everything else meanwhile.
@Suite(.serialized, .timeLimit(.minutes(2))) struct UserTokenURLLoadTests {
    @Test func slowKeySetsLeaveTheNodeAnsweringItsOtherRequests() async throws {
        try await UserTokenURLLimitTests.withSlowHost(.trickling(every: .milliseconds(300))) { certificates, host in
            let limits = TransportLimits(maxConnections: 20)
            let fixture = try await Fixture.make(userTokens: UserTokenURLLimitTests.options(
                certificates, timeout: .seconds(20), maxWaiting: UserTokenOptions.waitingLimit(maxConnections: limits.maxConnections)))
            let waitingCap = UserTokenOptions.waitingLimit(maxConnections: limits.maxConnections)
            let answered = Count()
            let issuer = TokenIssuer()
            // Three tenants, each with its key set at a URL of the slow host.
            var signers: [Signer] = []
            for tenant in ["a", "b", "c"] {
                let (application, key) = try await fixture.services.testApplication(name: "tenant \(tenant)")
                _ = try await fixture.services.userIdentity.set(
                    applicationId: application.id, issuer.configuration(jwksUrl: "https://127.0.0.1:\(host.port)/\(tenant)/jwks.json"),
                    byOperator: true)
                signers.append(Signer(keyId: key.keyId, secret: key.secret))
            }
            let token = try await issuer.es256Token(TokenIssuer.claims(user: "alice"))
            let requests = (0..<25).map { index in Self.registration(fixture, signer: signers[index % 3], device: "d\(index)", token: token) }

            try await RealPort.serve(fixture, limits: limits, rateLimits: .tests) { port, _ in
                let registrations = Task {
                    await withTaskGroup(of: Int?.self) { group in
                        for request in requests {
                            group.addTask {
                                guard let connection = try? RawConnection(port: port, sending: request) else { return nil }
                                defer { connection.disconnect() }
                                // A thread each: 25 reads blocked on GCD's few threads would starve the
                                // Swift pool that the server and this test run on.
                                let status = await connection.converse { $0.readResponse(timeout: 60)?.status }
                                answered.add()
                                return status
                            }
                        }
                        return await group.reduce(into: [Int?]()) { $0.append($1) }
                    }
                }
                // All but the registrations the cap lets wait are refused at once; the others wait
                // for fetches that trickle for 20 s (the deadline here, so that a loaded machine
                // has time to reach this point while they do).
                let deadline = ContinuousClock.now + .seconds(60)
                while host.accepted < 1 || answered.value < requests.count - waitingCap, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                }
                try #require(host.accepted >= 1, "no key set was fetched")
                #expect(answered.value >= requests.count - waitingCap, "registrations beyond the cap were not refused at once")

                // While the fetches trickle: every other request is answered within 2 s.
                for path in ["/healthz", "/v1/admin/user-identity"] {
                    let request = "GET \(path) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(fixture.adminToken)\r\nConnection: close\r\n\r\n"
                    let connection = try RawConnection(port: port, sending: request)
                    let answer = await connection.converse { $0.readResponse(timeout: 2) }
                    connection.disconnect()
                    #expect(answer?.status == 200, "\(path) was not answered within 2 s while key sets trickled in")
                }
                #expect(host.open >= 1, "the fetches had ended before the node was asked: this tested nothing")

                let statuses = await registrations.value
                // Which tenants' registrations came first decides which URLs were fetched before
                // the waiting registrations reached their cap; never more than one fetch a URL.
                #expect((1...3).contains(host.accepted), "\(host.accepted) fetches for 3 URLs")
                #expect(statuses.allSatisfy { $0 == 503 }, "every registration is refused, none left unanswered: \(statuses)")
                #expect(await host.openAfterWaiting(upTo: 5) == 0, "a key-set fetch outlived its deadline")
            }
    
        }
    }

    /// A signed registration carrying a user token, as raw bytes.
    static func registration(_ fixture: Fixture, signer: Signer, device: String, token: String) -> Data {
        let key = fixture.deviceKeys.key(for: device)
        let body = try! Client.encode(RegisterDeviceRequest(
            userId: "alice", deviceId: device, platform: "linux", devicePublicKey: DeviceKeys.publicKey(key)))
        // Closed by the server once answered: a refused registration's slot is free again however
        // late this test's own threads get to close their end on a loaded machine.
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
