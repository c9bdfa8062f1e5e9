import Backplane
import Foundation
import JWTKit
import BackplaneWire
import Synchronization

/// Apple's push provider API, as far as a backplane can tell: HTTP/2 over TLS, `POST
/// /3/device/<token>`, the provider token checked as APNs checks it (ES256 signature by the
/// team's key, `kid`, `iss`, `iat` under an hour old), the topic, push type and priority of a
/// background push, and APNs' answers: 200 with an `apns-id`, 400/403/410/429 with `{"reason"}`.
public final class LocalAPNs: Sendable {
    public struct Push: Sendable {
        public var token: String
        public var topic: String?
        public var collapseId: String?
        public var expiration: String?
        public var payload: JSONValue
        /// The provider token's `iat`: tokens are kept, and renewed, by the sender.
        public var issuedAt: Date
        public var connection: Int
        public var receivedAt: ContinuousClock.Instant
        /// The wall clock's time of it, for a process that compares with another's (benchmarks/push).
        public var receivedDate: Date
    }

    public struct Behaviour: Sendable {
        /// Tokens answered 410 Unregistered.
        public var unregistered: Set<String> = []
        /// Tokens answered 400 BadDeviceToken.
        public var badTokens: Set<String> = []
        /// The next this many pushes are answered 429 TooManyRequests.
        public var tooManyRequests = 0
        public init() {}
    }

    public let server: LocalHTTP2Server
    public let teamId: String
    public let keyId: String
    public let topic: String
    private let keys: JWTKeyCollection
    private let now: @Sendable () -> Date
    private let state = Mutex<(pushes: [Push], refusals: [(status: Int, reason: String)], behaviour: Behaviour, verified: [String: ProviderClaims])>(
        ([], [], Behaviour(), [:]))

    public var pushes: [Push] { state.withLock { $0.pushes } }
    public var refusals: [(status: Int, reason: String)] { state.withLock { $0.refusals } }
    public func behave(_ change: (inout Behaviour) -> Void) { state.withLock { change(&$0.behaviour) } }

    private init(server: LocalHTTP2Server, teamId: String, keyId: String, topic: String, keys: JWTKeyCollection, now: @escaping @Sendable () -> Date) {
        self.now = now
        self.server = server
        self.teamId = teamId
        self.keyId = keyId
        self.topic = topic
        self.keys = keys
    }

    /// Trusts `publicKey` as the team's key `keyId`.
    public static func start(
        _ certificates: TestCertificates.Made, teamId: String, keyId: String, publicKey: ES256PublicKey, topic: String,
        now: @escaping @Sendable () -> Date = { Date() }
    ) async throws -> LocalAPNs {
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: publicKey, kid: JWKIdentifier(string: keyId))
        let box = Mutex<LocalAPNs?>(nil)
        let server = try await LocalHTTP2Server.start(certificate: certificates.certificate, privateKey: certificates.privateKey) { request in
            guard let apns = box.withLock({ $0 }) else { return .init(status: 503) }
            return await apns.answer(request)
        }
        let apns = LocalAPNs(server: server, teamId: teamId, keyId: keyId, topic: topic, keys: keys, now: now)
        box.withLock { $0 = apns }
        return apns
    }

    private func refuse(_ status: Int, _ reason: String) -> LocalHTTP2Server.Answer {
        state.withLock { $0.refusals.append((status, reason)) }
        var body = #"{"reason":"\#(reason)""#
        if status == 410 { body += #","timestamp":\#(Int64(Date().timeIntervalSince1970 * 1000))"# }
        return .json(status, body + "}", headers: [("apns-id", UUID().uuidString)])
    }

    private func answer(_ request: LocalHTTP2Server.Request) async -> LocalHTTP2Server.Answer {
        guard request.majorVersion == 2 else { return refuse(400, "BadRequest") }
        guard request.method == "POST" else { return refuse(405, "MethodNotAllowed") }
        guard request.path.hasPrefix("/3/device/") else { return refuse(404, "BadPath") }
        guard let token = String(request.path.dropFirst("/3/device/".count)).removingPercentEncoding, !token.isEmpty else {
            return refuse(400, "BadDeviceToken")
        }
        guard let authorization = request.header("authorization"), authorization.hasPrefix("bearer ") else {
            return refuse(403, "MissingProviderToken")
        }
        let jwt = String(authorization.dropFirst("bearer ".count))
        guard let header = Self.jwtHeader(jwt), header["alg"] == "ES256", header["kid"] == keyId else {
            return refuse(403, "InvalidProviderToken")
        }
        // A token's signature is checked once, as APNs keeps a connection's token: the same
        // token again is only checked for its age.
        let claims: ProviderClaims
        if let verified = state.withLock({ $0.verified[jwt] }) {
            claims = verified
        } else {
            do {
                claims = try await keys.verify(jwt, as: ProviderClaims.self)
            } catch {
                return refuse(403, "InvalidProviderToken")
            }
            state.withLock { $0.verified[jwt] = claims }
        }
        guard claims.iss.value == teamId else { return refuse(403, "InvalidProviderToken") }
        // Apple documents `iat` as whole seconds since 1970.
        guard case .int? = Self.jwtClaims(jwt)?["iat"] else { return refuse(403, "InvalidProviderToken") }
        let age = now().timeIntervalSince(claims.iat.value)
        guard age < 3600 else { return refuse(403, "ExpiredProviderToken") }
        guard age > -60 else { return refuse(403, "InvalidProviderToken") }
        guard let topic = request.header("apns-topic") else { return refuse(400, "MissingTopic") }
        guard topic == self.topic else { return refuse(400, "DeviceTokenNotForTopic") }
        guard request.header("apns-push-type") == "background" else { return refuse(400, "InvalidPushType") }
        // Apple refuses priority 10 for a background push.
        guard request.header("apns-priority") == "5" else { return refuse(400, "BadPriority") }
        guard let payload = try? JSONDecoder().decode(JSONValue.self, from: request.body),
            case .object(let fields) = payload, case .object(let aps)? = fields["aps"], aps["content-available"] == .int(1)
        else { return refuse(400, "BadPayload") }
        let behaviour = state.withLock { state -> Behaviour in
            let behaviour = state.behaviour
            if state.behaviour.tooManyRequests > 0 { state.behaviour.tooManyRequests -= 1 }
            return behaviour
        }
        if behaviour.tooManyRequests > 0 { return refuse(429, "TooManyRequests") }
        if behaviour.unregistered.contains(token) { return refuse(410, "Unregistered") }
        if behaviour.badTokens.contains(token) { return refuse(400, "BadDeviceToken") }
        state.withLock {
            $0.pushes.append(Push(
                token: token, topic: topic, collapseId: request.header("apns-collapse-id"), expiration: request.header("apns-expiration"),
                payload: payload, issuedAt: claims.iat.value, connection: request.connection, receivedAt: .now, receivedDate: Date()))
        }
        return .init(status: 200, headers: [("apns-id", UUID().uuidString)])
    }

    static func jwtHeader(_ jwt: String) -> [String: String]? {
        guard let first = jwt.split(separator: ".").first, let data = Base64URL.decode(String(first)) else { return nil }
        return try? JSONDecoder().decode([String: String].self, from: data)
    }

    /// The claims as sent, to check how they are written (numbers as integers).
    static func jwtClaims(_ jwt: String) -> [String: JSONValue]? {
        let parts = jwt.split(separator: ".")
        guard parts.count == 3, let data = Base64URL.decode(String(parts[1])) else { return nil }
        return try? JSONDecoder().decode([String: JSONValue].self, from: data)
    }

    struct ProviderClaims: JWTPayload {
        var iss: IssuerClaim
        var iat: IssuedAtClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }
}

/// Google's OAuth 2.0 token endpoint and FCM's HTTP v1 send, on one HTTP/2 server: the grant's
/// RS256 assertion checked against the service account's key (`iss`, `scope`, `aud`, an hour
/// at most), bearer tokens that only it issued, the project, the data message with Android's
/// high priority, and FCM's error bodies.
public final class LocalGoogle: Sendable {
    public struct Message: Sendable {
        public var project: String
        public var token: String
        public var data: [String: String]
        public var androidPriority: String?
        public var connection: Int
        public var receivedAt: ContinuousClock.Instant
        public var receivedDate: Date
    }

    public struct Behaviour: Sendable {
        public var unregistered: Set<String> = []
        public var invalidTokens: Set<String> = []
        /// Tokens of another Firebase project: 403 SENDER_ID_MISMATCH.
        public var otherProjectTokens: Set<String> = []
        public var quotaExceeded = 0
        /// Every grant refused with `invalid_grant` (a deleted service account key).
        public var refuseGrants = false
        public init() {}
    }

    public let server: LocalHTTP2Server
    public let projectId: String
    public let clientEmail: String
    private let keys: JWTKeyCollection
    private let now: @Sendable () -> Date
    private let state = Mutex<(messages: [Message], grants: Int, accessTokens: Set<String>, behaviour: Behaviour)>(([], 0, [], Behaviour()))

    public var messages: [Message] { state.withLock { $0.messages } }
    public var grantsIssued: Int { state.withLock { $0.grants } }
    public func behave(_ change: (inout Behaviour) -> Void) { state.withLock { change(&$0.behaviour) } }
    public var tokenURL: URL { server.url.appendingPathComponent("token") }

    private init(server: LocalHTTP2Server, projectId: String, clientEmail: String, keys: JWTKeyCollection, now: @escaping @Sendable () -> Date) {
        self.now = now
        self.server = server
        self.projectId = projectId
        self.clientEmail = clientEmail
        self.keys = keys
    }

    public static func start(
        _ certificates: TestCertificates.Made, projectId: String, clientEmail: String, keyId: String, publicKey: Insecure.RSA.PublicKey,
        now: @escaping @Sendable () -> Date = { Date() }
    ) async throws -> LocalGoogle {
        let keys = JWTKeyCollection()
        await keys.add(rsa: publicKey, digestAlgorithm: .sha256, kid: JWKIdentifier(string: keyId))
        let box = Mutex<LocalGoogle?>(nil)
        let server = try await LocalHTTP2Server.start(certificate: certificates.certificate, privateKey: certificates.privateKey) { request in
            guard let google = box.withLock({ $0 }) else { return .init(status: 503) }
            return await google.answer(request)
        }
        let google = LocalGoogle(server: server, projectId: projectId, clientEmail: clientEmail, keys: keys, now: now)
        box.withLock { $0 = google }
        return google
    }

    private func answer(_ request: LocalHTTP2Server.Request) async -> LocalHTTP2Server.Answer {
        guard request.method == "POST" else { return .init(status: 405) }
        if request.path == "/token" { return await grant(request) }
        return send(request)
    }

    private func oauthError(_ error: String, _ description: String) -> LocalHTTP2Server.Answer {
        .json(400, #"{"error":"\#(error)","error_description":"\#(description)"}"#)
    }

    private func grant(_ request: LocalHTTP2Server.Request) async -> LocalHTTP2Server.Answer {
        guard request.header("content-type")?.hasPrefix("application/x-www-form-urlencoded") == true else {
            return oauthError("invalid_request", "Bad content type.")
        }
        var form: [String: String] = [:]
        for pair in String(decoding: request.body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? "" }
            if parts.count == 2 { form[parts[0]] = parts[1] }
        }
        guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer", let assertion = form["assertion"] else {
            return oauthError("unsupported_grant_type", "Invalid grant_type.")
        }
        if state.withLock({ $0.behaviour.refuseGrants }) { return oauthError("invalid_grant", "Invalid JWT Signature.") }
        guard LocalAPNs.jwtHeader(assertion)?["alg"] == "RS256" else { return oauthError("invalid_grant", "Invalid JWT Signature.") }
        let claims: AssertionClaims
        do {
            claims = try await keys.verify(assertion, as: AssertionClaims.self)
        } catch {
            return oauthError("invalid_grant", "Invalid JWT Signature.")
        }
        guard claims.iss.value == clientEmail else { return oauthError("invalid_grant", "Invalid issuer.") }
        guard let raw = LocalAPNs.jwtClaims(assertion), case .int? = raw["iat"], case .int? = raw["exp"] else {
            return oauthError("invalid_grant", "Invalid JWT: iat and exp must be integers.")
        }
        guard claims.aud.value.contains(tokenURL.absoluteString) else { return oauthError("invalid_grant", "Invalid JWT audience.") }
        guard claims.scope.split(separator: " ").contains("https://www.googleapis.com/auth/firebase.messaging") else {
            return oauthError("invalid_scope", "Invalid OAuth scope.")
        }
        let lifetime = claims.exp.value.timeIntervalSince(claims.iat.value)
        guard lifetime > 0, lifetime <= 3600, abs(claims.iat.value.timeIntervalSince(now())) < 300 else {
            return oauthError("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
        }
        let token = "ya29.local-" + UUID().uuidString
        state.withLock { $0.grants += 1; $0.accessTokens.insert(token) }
        return .json(200, #"{"access_token":"\#(token)","expires_in":3599,"token_type":"Bearer"}"#)
    }

    private func fcmError(_ status: Int, _ code: String, _ message: String, errorCode: String? = nil, field: String? = nil) -> LocalHTTP2Server.Answer {
        var details: [String] = []
        if let errorCode { details.append(#"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(errorCode)"}"#) }
        if let field {
            details.append(#"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"\#(field)","description":"Invalid registration token"}]}"#)
        }
        return .json(status, #"{"error":{"code":\#(status),"message":"\#(message)","status":"\#(code)","details":[\#(details.joined(separator: ","))]}}"#)
    }

    private func send(_ request: LocalHTTP2Server.Request) -> LocalHTTP2Server.Answer {
        guard request.majorVersion == 2 else { return .init(status: 505) }
        let parts = request.path.split(separator: "/")
        guard parts.count == 4, parts[0] == "v1", parts[1] == "projects", parts[3] == "messages:send" else { return .init(status: 404) }
        guard let authorization = request.header("authorization"), authorization.hasPrefix("Bearer "),
            state.withLock({ $0.accessTokens.contains(String(authorization.dropFirst("Bearer ".count))) })
        else {
            return fcmError(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
        }
        guard parts[2] == projectId else {
            return fcmError(403, "PERMISSION_DENIED", "Permission 'cloudmessaging.messages.create' denied on resource.")
        }
        struct Body: Decodable {
            struct Message: Decodable {
                struct Android: Decodable { var priority: String? }
                public var token: String
                public var data: [String: String]?
                var android: Android?
            }
            var message: Message
        }
        guard let body = try? JSONDecoder().decode(Body.self, from: request.body) else {
            return fcmError(400, "INVALID_ARGUMENT", "Invalid JSON payload received.", errorCode: "INVALID_ARGUMENT")
        }
        let token = body.message.token
        let behaviour = state.withLock { state -> Behaviour in
            let behaviour = state.behaviour
            if state.behaviour.quotaExceeded > 0 { state.behaviour.quotaExceeded -= 1 }
            return behaviour
        }
        if behaviour.quotaExceeded > 0 {
            return fcmError(429, "RESOURCE_EXHAUSTED", "Quota exceeded.", errorCode: "QUOTA_EXCEEDED")
        }
        if behaviour.unregistered.contains(token) { return fcmError(404, "NOT_FOUND", "Requested entity was not found.", errorCode: "UNREGISTERED") }
        if behaviour.otherProjectTokens.contains(token) {
            return fcmError(403, "PERMISSION_DENIED", "SenderId mismatch", errorCode: "SENDER_ID_MISMATCH")
        }
        if behaviour.invalidTokens.contains(token) {
            return fcmError(400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token", errorCode: "INVALID_ARGUMENT", field: "message.token")
        }
        state.withLock {
            $0.messages.append(Message(
                project: String(parts[2]), token: token, data: body.message.data ?? [:], androidPriority: body.message.android?.priority,
                connection: request.connection, receivedAt: .now, receivedDate: Date()))
        }
        return .json(200, #"{"name":"projects/\#(projectId)/messages/\#(UInt32.random(in: 1...UInt32.max))"}"#)
    }

    struct AssertionClaims: JWTPayload {
        var iss: IssuerClaim
        var scope: String
        var aud: AudienceClaim
        var iat: IssuedAtClaim
        var exp: ExpirationClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }
}
