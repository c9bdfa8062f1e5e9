@testable import Backplane
import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing
import TestSupport

/// The limits of key-set fetches (`jwksUrl`): a host that trickles its answer or never answers
/// costs a registration one deadline, costs the node one fetch per URL and nothing after it, and
/// holds none of the node's connections past the deadline. Wall-clock bounds here are generous
/// upper bounds on something that, broken, never ends.
@Suite(.serialized, .timeLimit(.minutes(2))) struct UserTokenURLLimitTests {
    static func options(_ certificates: TestCertificates.Made, timeout: Duration = .seconds(1), maxWaiting: Int = 64) -> UserTokenOptions {
        UserTokenOptions(
            allowJWKSURL: true, jwksTrustedCertificateAuthorities: certificates.authority, jwksFetchTimeout: timeout,
            maxRegistrationsWaitingForKeySets: maxWaiting)
    }

    /// openssl makes the key-set hosts' certificates; CI requires it.
    static func certificates(in root: URL) async throws -> TestCertificates.Made? {
        guard let openssl = TestCertificates.openssl else {
            let message = "openssl is not installed (apt-get install openssl): the key-set limit tests did not run"
            if ProcessInfo.processInfo.environment["BACKPLANE_REQUIRE_DEPLOY_TOOLS"] == "1" { Issue.record(Comment(rawValue: message)) }
            print("warning: \(message)")
            return nil
        }
        return try await TestCertificates.make(in: root, openssl: openssl)
    }

    /// Runs `body` with a key-set host of `manner` and the certificates it serves with; not at all
    /// (a warning, or a failure where CI requires openssl) without openssl.
    static func withSlowHost(
        _ manner: SlowKeySetHost.Manner, _ body: (TestCertificates.Made, SlowKeySetHost) async throws -> Void
    ) async throws {
        let root = try createdTemporaryDirectory("backplane-jwks-limits")
        defer { try? FileManager.default.removeItem(at: root) }
        guard let certificates = try await certificates(in: root) else { return }
        let host = try await SlowKeySetHost.start(manner, certificates: certificates)
        defer { Task { await host.stop() } }
        try await body(certificates, host)
    }

    @Test func aTricklingKeySetIsCutOffAtTheDeadlineFetchedOnceForAllAndItsFailureRemembered() async throws {
        try await Self.withSlowHost(.trickling(every: .milliseconds(300))) { certificates, host in
            let clock = TestClock()
            let fixture = try await Fixture.make(clock: clock, userTokens: Self.options(certificates))
            let issuer = TokenIssuer()
            try await fixture.test { client in
                #expect(try await client.setUserIdentity(issuer.configuration(jwksUrl: "https://127.0.0.1:\(host.port)/jwks.json")).status == .ok)
                let started = ContinuousClock.now
                let answers = try await withThrowingTaskGroup(of: TestResponse.self) { group in
                    for device in 0..<20 {
                        group.addTask {
                            try await client.register(user: "alice", device: "d\(device)", token: try await issuer.es256Token(TokenIssuer.claims(user: "alice")))
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                let elapsed = ContinuousClock.now - started
                #expect(answers.allSatisfy { $0.status == .serviceUnavailable }, "\(answers.map(\.status))")
                #expect(elapsed < .seconds(30), "the fetch was not cut off at its 1 s deadline: \(elapsed)")
                #expect(host.accepted == 1, "one fetch for twenty registrations, not \(host.accepted)")
                #expect(await host.openAfterWaiting(upTo: 5) == 0, "the fetch's connection outlived its deadline")
                // The reason stays in the log; the caller learns only that the key set could not be fetched.
                let message = answers[0].errorMessage
                #expect(message.contains("could not be fetched") && !message.contains("127.0.0.1") && !message.contains("answer"), "\(message)")

                // Remembered: refused at once, without a fetch.
                let remembered = try await client.register(user: "alice", device: "late", token: try await issuer.es256Token(TokenIssuer.claims(user: "alice")))
                #expect(remembered.status == .serviceUnavailable)
                #expect(host.accepted == 1, "a failure 0 s old was fetched again")
                clock.advance(by: JWKSFetcher.failureMemory + 1)
                let again = try await client.register(user: "alice", device: "later", token: try await issuer.es256Token(TokenIssuer.claims(user: "alice")))
                #expect(again.status == .serviceUnavailable)
                #expect(host.accepted == 2, "a remembered failure is tried again once its memory ends")
            }
        }
    }

    @Test func aHostThatNeverAnswersIsRefusedAtTheDeadline() async throws {
        try await Self.withSlowHost(.silent) { certificates, host in
            // The documented deadline, not a test's shorter one: 5 s for all of it, not 5 s per step.
            let fixture = try await Fixture.make(userTokens: Self.options(certificates, timeout: .seconds(5)))
            let issuer = TokenIssuer()
            try await fixture.test { client in
                #expect(try await client.setUserIdentity(issuer.configuration(jwksUrl: "https://127.0.0.1:\(host.port)/jwks.json")).status == .ok)
                let started = ContinuousClock.now
                let answer = try await client.register(user: "alice", device: "d1", token: try await issuer.es256Token(TokenIssuer.claims(user: "alice")))
                let elapsed = ContinuousClock.now - started
                #expect(answer.status == .serviceUnavailable)
                #expect(elapsed >= .seconds(4.5) && elapsed < .seconds(9), "answered after \(elapsed), not at the 5 s deadline")
                #expect(await host.openAfterWaiting(upTo: 5) == 0)
            }
        }
    }

    @Test func aNetworkErrorIsNotToldToTheCaller() async throws {
        let root = try createdTemporaryDirectory("backplane-jwks-limits")
        defer { try? FileManager.default.removeItem(at: root) }
        guard let certificates = try await Self.certificates(in: root) else { return }
        // A port that refuses connections for the whole test (a port merely free could become
        // another test's server meanwhile).
        let refusing = try RefusingPort()
        defer { refusing.close() }
        let port = refusing.port
        let fixture = try await Fixture.make(userTokens: Self.options(certificates))
        let issuer = TokenIssuer()
        try await fixture.test { client in
            #expect(try await client.setUserIdentity(issuer.configuration(jwksUrl: "https://127.0.0.1:\(port)/jwks.json")).status == .ok)
            let answer = try await client.register(user: "alice", device: "d1", token: try await issuer.es256Token(TokenIssuer.claims(user: "alice")))
            #expect(answer.status == .serviceUnavailable)
            let message = answer.errorMessage.lowercased()
            for probe in ["refused", "errno", "connect", "reached", "tls", "127.0.0.1"] {
                #expect(!message.contains(probe), "the 503 tells '\(probe)': \(answer.errorMessage)")
            }
        }
    }

    /// The key-set host writes the Cache-Control header: a directive with no name is skipped,
    /// never a crash of the node.
    @Test func aCacheControlOfNothingButEqualsSignsIsRead() {
        #expect(JWKSFetcher.maxAge("=") == nil)
        #expect(JWKSFetcher.maxAge("max-age=60, =") == 60)
        #expect(JWKSFetcher.maxAge("a,=,b, =x, max-age=") == nil)
        #expect(JWKSFetcher.maxAge(", ,") == nil)
    }

    /// A token whose claims are refused anyway starts no fetch.
    @Test func aTokenWithRefusedClaimsStartsNoFetch() async throws {
        try await Self.withSlowHost(.silent) { certificates, host in
            let fixture = try await Fixture.make(userTokens: Self.options(certificates))
            let issuer = TokenIssuer()
            try await fixture.test { client in
                #expect(try await client.setUserIdentity(issuer.configuration(jwksUrl: "https://127.0.0.1:\(host.port)/jwks.json")).status == .ok)
                let expired = try await issuer.es256Token(TokenIssuer.claims(user: "alice", now: Date().addingTimeInterval(-3600)))
                #expect(try await client.register(user: "alice", device: "d1", token: expired).errorCode == .userTokenInvalid)
                let otherUser = try await issuer.es256Token(TokenIssuer.claims(user: "mallory"))
                #expect(try await client.register(user: "alice", device: "d1", token: otherUser).errorCode == .userTokenMismatch)
                #expect(host.accepted == 0, "a fetch was started for a token refused by its claims")
            }
        }
    }

    /// The fetch ends, and its connection closes, when its last waiter is cancelled (the
    /// registration's client went away), long before its deadline.
    @Test func aFetchNobodyWaitsForIsCancelled() async throws {
        try await Self.withSlowHost(.trickling(every: .milliseconds(300))) { certificates, host in
            let fetcher = JWKSFetcher(
                options: .init(trustedCertificateAuthorities: certificates.authority, timeout: .seconds(60)), now: { Date() })
            let url = "https://127.0.0.1:\(host.port)/jwks.json"
            let waiters = (0..<3).map { _ in Task { try await fetcher.keys(at: url) } }
            let deadline = ContinuousClock.now + .seconds(20)
            while host.accepted == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            try #require(host.accepted == 1)
            waiters[0].cancel()
            waiters[1].cancel()
            await #expect(throws: CancellationError.self) { try await waiters[0].value }
            #expect(host.open == 1, "the fetch stopped while a registration still waits for it")
            waiters[2].cancel()
            await #expect(throws: CancellationError.self) { try await waiters[2].value }
            #expect(await host.openAfterWaiting(upTo: 10) == 0, "the fetch went on after its last waiter left")
        }
    }
}
