import Backplane
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTLS
import HummingbirdTesting
import NIOSSL
import ServiceLifecycleTestKit
import Synchronization
import BackplaneWire
import Testing
import TestSupport

/// Keys at a URL (`jwksUrl`): fetched over https from a real TLS origin, cached, and fetched
/// again for a key id it does not hold, at most once a minute.
@Suite struct UserTokenURLTests {
    @Test func aKeyRotatedInIsFetchedOnItsFirstTokenAtMostOnceAMinute() async throws {
        guard let openssl = TestCertificates.openssl else {
            let message = "openssl is not installed (apt-get install openssl): the key-set URL test did not run"
            if ProcessInfo.processInfo.environment["BACKPLANE_REQUIRE_DEPLOY_TOOLS"] == "1" { Issue.record(Comment(rawValue: message)) }
            print("warning: \(message)")
            return
        }
        let root = try createdTemporaryDirectory("backplane-jwks")
        defer { try? FileManager.default.removeItem(at: root) }
        let certificates = try await TestCertificates.make(in: root, openssl: openssl)
        let issuer = TokenIssuer()
        let origin = KeySetOrigin(body: issuer.jwks(includingEdDSA: false))
        try await origin.serve(certificates) { port in
            let clock = TestClock()
            let options = UserTokenOptions(allowJWKSURL: true, jwksTrustedCertificateAuthorities: certificates.authority)
            let fixture = try await Fixture.make(clock: clock, userTokens: options)
            try await fixture.test { client in
                let url = "https://127.0.0.1:\(port)/jwks.json"
                var plain = issuer.configuration(jwksUrl: "http://127.0.0.1:\(port)/jwks.json")
                #expect(try await client.setUserIdentity(plain).errorDetails?["field"] == .string("jwksUrl"), "http is refused")
                plain.jwksUrl = url
                #expect(try await client.setUserIdentity(plain).status == .ok)

                let first = try await client.register(user: "alice", device: "d1", token: try await issuer.es256Token(TokenIssuer.claims(user: "alice")))
                #expect(first.status == .created, "\(first.text)")
                let second = try await client.register(user: "alice", device: "d2", token: try await issuer.es256Token(TokenIssuer.claims(user: "alice")))
                #expect(second.status == .created, "\(second.text)")
                #expect(origin.fetches == 1, "the key set was not cached")

                // The backend rotates in a new key and signs with it at once.
                let rotated = TokenIssuer(es256Kid: "es-2")
                origin.body = .object(["keys": .array([
                    issuer.jwks(includingEdDSA: false).keys[0], rotated.jwks(includingEdDSA: false).keys[0],
                ])])
                let early = try await client.register(user: "alice", device: "d3", token: try await rotated.es256Token(TokenIssuer.claims(user: "alice")))
                #expect(early.errorCode == .userTokenInvalid, "fetched again within the minute: \(early.text)")
                #expect(origin.fetches == 1)
                clock.advance(by: 61)
                let late = try await client.register(user: "alice", device: "d3", token: try await rotated.es256Token(TokenIssuer.claims(user: "alice")))
                #expect(late.status == .created, "\(late.text)")
                #expect(origin.fetches == 2)
                // The old key still works, from the same fetch.
                let old = try await client.register(user: "alice", device: "d4", token: try await issuer.es256Token(TokenIssuer.claims(user: "alice")))
                #expect(old.status == .created, "\(old.text)")
                #expect(origin.fetches == 2)
            }
        }
    }
}

extension JSONValue {
    /// The entries of a key set's `keys`.
    var keys: [JSONValue] {
        guard case .object(let set) = self, case .array(let keys)? = set["keys"] else { return [] }
        return keys
    }
}

/// The app backend's https origin for its key set: serves whatever `body` is now, with
/// `Cache-Control: max-age=3600`, and counts the fetches.
final class KeySetOrigin: Sendable {
    private let state: Mutex<(body: JSONValue, fetches: Int)>

    init(body: JSONValue) {
        state = Mutex((body, 0))
    }

    var body: JSONValue {
        get { state.withLock { $0.body } }
        set { state.withLock { $0.body = newValue } }
    }

    var fetches: Int { state.withLock { $0.fetches } }

    func serve(_ certificates: TestCertificates.Made, _ body: @escaping @Sendable (Int) async throws -> Void) async throws {
        let router = Router()
        router.get("jwks.json") { [self] _, _ -> Response in
            let json = state.withLock { state in
                state.fetches += 1
                return state.body
            }
            return Response(
                status: .ok, headers: [.contentType: "application/json", .cacheControl: "max-age=3600"],
                body: .init(byteBuffer: ByteBuffer(bytes: try JSONEncoder().encode(json))))
        }
        let tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificates.certificate.path).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: certificates.privateKey.path, format: .pem)))
        try await testGracefulShutdown { _ in
            let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
            let app = Application(
                router: router, server: try .tls(tlsConfiguration: tls),
                configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) })
            let server = Task { try await app.runService(gracefulShutdownSignals: []) }
            defer { server.cancel() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            try await body(port)
        }
    }
}
