import AsyncHTTPClient
import Foundation
import JWTKit
import NIOCore
import Synchronization
import BackplaneWire

/// Background pushes through Apple's provider API: HTTP/2 `POST /3/device/<token>`, signed
/// by a provider token (ES256 JWT with `iss` = team id and `kid` = key id) that is kept and
/// renewed after 50 minutes (Apple refuses one older than an hour, and renewing more often than
/// every 20 minutes). Each application has one HTTP client, so its pushes share one HTTP/2
/// connection to its environment's host, whatever other applications do.
final class APNsSender: Sendable {
    /// A provider token is renewed once it is this old.
    static let tokenRenewalAge: TimeInterval = 50 * 60
    /// Apple keeps an undelivered background push this long (`apns-expiration`), then drops it;
    /// the device syncs at its interval anyway.
    static let expiration: TimeInterval = 24 * 3600
    /// Pushes of one device replace each other while it is offline: it needs to sync once.
    static let collapseId = "backplane-sync"

    private struct ApplicationState {
        var client: HTTPClient
        var baseURL: URL
    }

    private let options: PushOptions
    private let now: @Sendable () -> Date
    private let applications = Mutex<[String: ApplicationState]>([:])
    private let tokens = KeptTokens()
    private let decoded = DecodedCredentials<APNsCredentials>()

    init(options: PushOptions, now: @escaping @Sendable () -> Date) {
        self.options = options
        self.now = now
    }

    private static let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")

    static let payload: [UInt8] = Array(#"{"aps":{"content-available":1},"\#(PushWakeUpPayload.key)":"\#(PushWakeUpPayload.value)"}"#.utf8)

    func send(_ target: PushTarget, measure: (Duration) -> Void) async -> PushResult {
        let credentials: APNsCredentials
        do {
            credentials = try decoded.value(of: target.credentials)
        } catch {
            return .credentialsRefused(reason: "the stored APNs credentials do not read")
        }
        var refused: KeptTokens.Token?
        while true {
            let client: HTTPClient, baseURL: URL, token: KeptTokens.Token
            do {
                (client, baseURL) = try self.client(target.applicationId, environment: credentials.environment)
                token = try await providerToken(target, credentials, refused: refused?.id)
            } catch let failure as KeptTokens.Failure {
                return failure.result
            } catch {
                return .retry(reason: "no HTTP client: \(error)", after: nil)
            }
            // Apple's tokens are hex; anything else a device sent is escaped to stay one path segment.
            let path = target.token.addingPercentEncoding(withAllowedCharacters: Self.unreserved) ?? ""
            var request = HTTPClientRequest(url: baseURL.absoluteString.trimmingSuffix("/") + "/3/device/" + path)
            request.method = .POST
            request.headers.add(name: "authorization", value: "bearer \(token.value)")
            request.headers.add(name: "apns-push-type", value: "background")
            request.headers.add(name: "apns-priority", value: "5")
            request.headers.add(name: "apns-topic", value: credentials.topic)
            request.headers.add(name: "apns-collapse-id", value: Self.collapseId)
            request.headers.add(name: "apns-expiration", value: String(Int64(now().timeIntervalSince1970 + Self.expiration)))
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: Self.payload))
            let started = ContinuousClock.now
            let answer: (status: Int, body: Data, retryAfter: Duration?)
            do {
                answer = try await PushHTTP.send(request, with: client)
            } catch {
                return .retry(reason: "APNs could not be reached: \(PushHTTP.short("\(error)"))", after: nil)
            }
            measure(ContinuousClock.now - started)
            let reason = (try? JSONDecoder().decode(APNsError.self, from: answer.body))?.reason ?? "HTTP \(answer.status)"
            switch (answer.status, reason) {
            case (200, _):
                return .delivered
            case (403, _) where refused == nil:
                // Expired in Apple's clock, or refused once: a new token, and one more try, before
                // calling the credentials broken.
                refused = token
                continue
            case (403, _):
                return .credentialsRefused(reason: PushHTTP.short(reason))
            case (410, _), (400, "BadDeviceToken"):
                return .tokenRejected(reason: PushHTTP.short(reason))
            default:
                return PushHTTP.byStatus(answer.status, reason: PushHTTP.short(reason), retryAfter: answer.retryAfter)
            }
        }
    }

    /// Closes the applications' connections.
    func shutdown() async {
        let clients = applications.withLock { applications in
            defer { applications = [:] }
            return applications.values.map(\.client)
        }
        for client in clients { try? await client.shutdown() }
    }

    /// The application's client, made on first use and again when its environment changes.
    private func client(_ applicationId: String, environment: APNsEnvironment) throws -> (HTTPClient, URL) {
        let baseURL = options.apnsURL(for: environment)
        var replaced: HTTPClient?
        defer { if let replaced { Task { try? await replaced.shutdown() } } }
        return try applications.withLock { applications in
            if let state = applications[applicationId], state.baseURL == baseURL { return (state.client, baseURL) }
            let client = try PushHTTP.client(trusting: options.trustedCertificateAuthorities)
            // Only once the new one exists: a failure leaves the old one in place, and open.
            replaced = applications[applicationId]?.client
            applications[applicationId] = ApplicationState(client: client, baseURL: baseURL)
            return (client, baseURL)
        }
    }

    /// The application's provider token: kept for 50 minutes, signed once for all the pushes
    /// that need it at the same time (`KeptTokens`).
    private func providerToken(_ target: PushTarget, _ credentials: APNsCredentials, refused: UInt64?) async throws -> KeptTokens.Token {
        let now = now()
        return try await tokens.token(for: target.applicationId, setAt: target.credentials.setAt, now: now, refused: refused) {
            let keys = JWTKeyCollection()
            do {
                await keys.add(
                    ecdsa: try ES256PrivateKey(pem: credentials.privateKey), kid: JWKIdentifier(string: credentials.keyId),
                    serializer: DefaultJWTSerializer(jsonEncoder: PushJWT.encoder))
            } catch {
                throw KeptTokens.Failure(result: .credentialsRefused(reason: "the APNs key does not read"))
            }
            let value = try await keys.sign(
                APNsProviderClaims(iss: IssuerClaim(value: credentials.teamId), iat: IssuedAtClaim(value: now)),
                kid: JWKIdentifier(string: credentials.keyId))
            return (value, now.addingTimeInterval(Self.tokenRenewalAge))
        }
    }
}

/// The claims of an APNs provider token: the team and when it was made, nothing else.
struct APNsProviderClaims: JWTPayload {
    var iss: IssuerClaim
    var iat: IssuedAtClaim

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// APNs' error body: `{"reason": "BadDeviceToken"}` (and a timestamp for 410).
private struct APNsError: Decodable {
    var reason: String
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
