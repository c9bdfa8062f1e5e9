import AsyncHTTPClient
import Foundation
import JWTKit
import NIOCore
import Synchronization
import BackplaneWire

/// Data messages through FCM's HTTP v1 API, `POST /v1/projects/<project>/messages:send` with a
/// bearer token from Google's OAuth 2.0 service-account grant (an RS256 JWT assertion). Access
/// tokens are kept until five minutes before they expire. The assertion always goes to the
/// operator's token URL (`PushOptions.googleTokenURL`): a tenant's service account cannot make
/// the backplane post a signed assertion anywhere else.
final class FCMSender: Sendable {
    static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// An access token is fetched again this long before Google says it expires.
    static let renewalMargin: TimeInterval = 5 * 60
    static let collapseKey = "backplane-sync"
    /// FCM keeps an undelivered message this long, then drops it.
    static let timeToLive = "86400s"

    private let options: PushOptions
    private let now: @Sendable () -> Date
    /// One client for every application: Google's hosts serve any project on one connection.
    private let client: Mutex<HTTPClient?> = Mutex(nil)
    private let tokens = KeptTokens()
    private let decoded = DecodedCredentials<FCMServiceAccount>()

    init(options: PushOptions, now: @escaping @Sendable () -> Date) {
        self.options = options
        self.now = now
    }

    func send(_ target: PushTarget, measure: (Duration) -> Void) async -> PushResult {
        let account: FCMServiceAccount
        do {
            account = try decoded.value(of: target.credentials)
        } catch {
            return .credentialsRefused(reason: "the stored service account does not read")
        }
        var refused: KeptTokens.Token?
        while true {
            let client: HTTPClient
            let accessToken: KeptTokens.Token
            do {
                client = try httpClient()
                accessToken = try await self.accessToken(target, account, client: client, refused: refused?.id)
            } catch let failure as KeptTokens.Failure {
                return failure.result
            } catch {
                return .retry(reason: "Google's token endpoint could not be reached: \(PushHTTP.short("\(error)"))", after: nil)
            }
            let base = options.fcmURL.absoluteString.trimmingSuffix("/")
            var request = HTTPClientRequest(url: "\(base)/v1/projects/\(account.projectId)/messages:send")
            request.method = .POST
            request.headers.add(name: "authorization", value: "Bearer \(accessToken.value)")
            request.headers.add(name: "content-type", value: "application/json")
            let message = FCMMessageRequest(message: .init(
                token: target.token, data: [PushWakeUpPayload.key: PushWakeUpPayload.value],
                android: .init(priority: "high", collapse_key: Self.collapseKey, ttl: Self.timeToLive)))
            guard let body = try? JSONEncoder().encode(message) else { return .failed(reason: "the message did not encode") }
            request.body = .bytes(ByteBuffer(data: body))
            let started = ContinuousClock.now
            let answer: (status: Int, body: Data, retryAfter: Duration?)
            do {
                answer = try await PushHTTP.send(request, with: client)
            } catch {
                return .retry(reason: "FCM could not be reached: \(PushHTTP.short("\(error)"))", after: nil)
            }
            measure(ContinuousClock.now - started)
            if answer.status == 200 { return .delivered }
            let error = (try? JSONDecoder().decode(FCMErrorBody.self, from: answer.body))?.error
            let code = error?.errorCode ?? error?.status ?? "HTTP \(answer.status)"
            let reason = PushHTTP.short(error.map { "\(code): \($0.message ?? "")" } ?? code)
            switch answer.status {
            case 401 where refused == nil:
                // The access token was revoked or expired early: fetch another, once.
                refused = accessToken
                continue
            case 403 where code == "SENDER_ID_MISMATCH", 404 where code == "UNREGISTERED":
                // The token belongs to another Firebase project, or its app is gone: the
                // token's fault, not the credentials' (one device must not stop every push).
                return .tokenRejected(reason: reason)
            case 401, 403:
                return .credentialsRefused(reason: reason)
            case 400 where code == "INVALID_ARGUMENT" && error?.isAboutToken == true:
                return .tokenRejected(reason: reason)
            default:
                return PushHTTP.byStatus(answer.status, reason: reason, retryAfter: answer.retryAfter)
            }
        }
    }

    func shutdown() async {
        let client = client.withLock { client in
            defer { client = nil }
            return client
        }
        try? await client?.shutdown()
    }

    private func httpClient() throws -> HTTPClient {
        try client.withLock { client in
            if let client { return client }
            let made = try PushHTTP.client(trusting: options.trustedCertificateAuthorities)
            client = made
            return made
        }
    }

    /// A kept access token, or a new one from the token endpoint, asked for once for all the
    /// pushes that need it at the same time (`KeptTokens`). Refused grants are the credentials'
    /// fault; anything else is worth a retry.
    private func accessToken(
        _ target: PushTarget, _ account: FCMServiceAccount, client: HTTPClient, refused: UInt64?
    ) async throws -> KeptTokens.Token {
        let now = now()
        let tokenURL = options.googleTokenURL.absoluteString
        return try await tokens.token(for: target.applicationId, setAt: target.credentials.setAt, now: now, refused: refused) {
            let keys = JWTKeyCollection()
            do {
                await keys.add(
                    rsa: try Insecure.RSA.PrivateKey(pem: account.privateKey), digestAlgorithm: .sha256,
                    kid: account.privateKeyId.map(JWKIdentifier.init(string:)), serializer: DefaultJWTSerializer(jsonEncoder: PushJWT.encoder))
            } catch {
                throw KeptTokens.Failure(result: .credentialsRefused(reason: "the service account's private key does not read"))
            }
            let assertion = try await keys.sign(GoogleAssertionClaims(
                iss: IssuerClaim(value: account.clientEmail), scope: Self.scope, aud: AudienceClaim(value: tokenURL),
                iat: IssuedAtClaim(value: now), exp: ExpirationClaim(value: now.addingTimeInterval(3600))))
            var request = HTTPClientRequest(url: tokenURL)
            request.method = .POST
            request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
            let form = "grant_type=\(Self.formEncoded("urn:ietf:params:oauth:grant-type:jwt-bearer"))&assertion=\(Self.formEncoded(assertion))"
            request.body = .bytes(ByteBuffer(string: form))
            let answer = try await PushHTTP.send(request, with: client)
            guard answer.status == 200 else {
                let body = try? JSONDecoder().decode(OAuthErrorBody.self, from: answer.body)
                let reason = PushHTTP.short(body.map { "\($0.error): \($0.error_description ?? "")" } ?? "token endpoint HTTP \(answer.status)")
                throw KeptTokens.Failure(result:
                    (400...403).contains(answer.status)
                        ? .credentialsRefused(reason: reason) : PushHTTP.byStatus(answer.status, reason: reason, retryAfter: answer.retryAfter))
            }
            // It goes into a header: printable ASCII without spaces, and bounded.
            guard let granted = try? JSONDecoder().decode(OAuthTokenBody.self, from: answer.body), !granted.access_token.isEmpty,
                granted.access_token.utf8.count <= 4096, granted.access_token.utf8.allSatisfy({ (0x21...0x7E).contains($0) })
            else {
                throw KeptTokens.Failure(result: .retry(reason: "the token endpoint's answer does not read", after: nil))
            }
            // Range-checked: the lifetime is the endpoint's to write. Google's is 3600 s. Kept
            // until five minutes before it ends (half of it, for a short one).
            let lifetime = TimeInterval(min(max(granted.expires_in ?? 3600, 60), 24 * 3600))
            return (granted.access_token, now.addingTimeInterval(max(lifetime - Self.renewalMargin, lifetime / 2)))
        }
    }

    /// `application/x-www-form-urlencoded`: everything but unreserved characters escaped.
    static func formEncoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")) ?? ""
    }
}

/// The JWT a service account signs to ask Google for an access token (RFC 7523).
struct GoogleAssertionClaims: JWTPayload {
    var iss: IssuerClaim
    var scope: String
    var aud: AudienceClaim
    var iat: IssuedAtClaim
    var exp: ExpirationClaim

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// `{"message": {...}}` of `messages:send`: a data message, high priority on Android so that it
/// wakes a dozing device.
private struct FCMMessageRequest: Encodable {
    struct Message: Encodable {
        var token: String
        var data: [String: String]
        var android: Android
    }

    struct Android: Encodable {
        var priority: String
        var collapse_key: String
        var ttl: String
    }

    var message: Message
}

private struct OAuthTokenBody: Decodable {
    var access_token: String
    var expires_in: Int?
}

private struct OAuthErrorBody: Decodable {
    var error: String
    var error_description: String?
}

/// FCM's error body: Google's `{"error": {"code", "message", "status", "details": [...]}}`, the
/// FCM error code in a detail of type `google.firebase.fcm.v1.FcmError`.
private struct FCMErrorBody: Decodable {
    struct Detail: Decodable {
        var type: String?
        var errorCode: String?
        var fieldViolations: [FieldViolation]?

        enum CodingKeys: String, CodingKey {
            case type = "@type"
            case errorCode, fieldViolations
        }
    }

    struct FieldViolation: Decodable {
        var field: String?
        var description: String?
    }

    struct Error: Decodable {
        var code: Int?
        var message: String?
        var status: String?
        var details: [Detail]?

        var errorCode: String? { details?.compactMap(\.errorCode).first }

        /// INVALID_ARGUMENT is about the token when a field violation names it, or the message does.
        var isAboutToken: Bool {
            let fields = details?.flatMap { $0.fieldViolations ?? [] }.compactMap(\.field) ?? []
            return fields.contains { $0.hasSuffix("token") } || (message?.lowercased().contains("registration token") ?? false)
        }
    }

    var error: Error
}
