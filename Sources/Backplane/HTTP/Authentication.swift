import Crypto
import Synchronization
import Foundation
import HTTPTypes
import Hummingbird
import BackplaneWire

/// Sign-in of signed requests (`RequestSigning` in BackplaneWire, documented in docs/openapi.yaml):
/// the app key's HMAC over method, path and query, timestamp, nonce, body hash and device id; a
/// timestamp within ±5 minutes; a well-formed nonce. With `requireDevice`, the request must also
/// carry a valid device credential, and then the caller is that device and no other. It only
/// verifies: the nonce is left unspent in the identity, for `SpendNonceMiddleware` or the
/// route's service to spend (`SignedRequest`).
struct SignedRequestMiddleware: RouterMiddleware {
    typealias Context = BackplaneRequestContext

    let services: BackplaneServices
    let requireDevice: Bool
    /// Checked once the device is proven and before its nonce is spent: a forged device id
    /// cannot spend another's requests, and a refused request may be sent again.
    let deviceLimiter: RateLimiter

    private static let keyedMACs = KeyedMACs()

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var request = request
        var context = context
        // The body is read once here (bounded) to hash it; handlers decode the same buffer.
        let body = try await request.collectBody(upTo: WireLimits.maxBodyBytes)
        let named = context.parameters.get("deviceId").map { $0.removingPercentEncoding ?? $0 }
        let identity = try await verify(request, body: body, pathDeviceId: named)
        if case .device(let signed, _) = identity, let wait = deviceLimiter.take("\(signed.device.applicationId)/\(signed.device.deviceId)") {
            services.metrics.rateLimited(scope: "device")
            throw BackplaneError.rateLimited("device", retryAfter: wait)
        }
        if let nonce = identity.signedNonce { services.credentialUse.usedKey(nonce.keyId, at: services.now()) }
        context.identity = identity
        return try await next(request, context)
    }

    /// Every check but the nonce's freshness; returns who signed, with the nonce to spend.
    private func verify(_ request: Request, body: ByteBuffer, pathDeviceId: String?) async throws -> Identity {
        let headers = SigningHeaders(request.headers)
        guard let keyId = headers.keyId,
              let timestampText = headers.timestamp,
              let nonce = headers.nonce,
              let signatureHex = headers.signature
        else {
            throw ServiceError.invalidSignature(
                "Device requests must be signed: send \(RequestSigning.Header.keyId), \(RequestSigning.Header.timestamp), "
                    + "\(RequestSigning.Header.nonce) and \(RequestSigning.Header.signature).")
        }
        guard let timestamp = Int64(timestampText) else {
            throw ServiceError.invalidSignature("\(RequestSigning.Header.timestamp) must be Unix seconds.")
        }
        let now = services.now()
        // In Double: any Int64 minus the server time is finite, where Int64 arithmetic could
        // overflow. The skew is printed only when it is a sane number of seconds.
        let skew = abs(now.timeIntervalSince1970 - Double(timestamp))
        guard skew <= RequestSigning.allowedClockSkew else {
            let distance = skew < 1e12 ? "\(Int64(skew)) s" : "more than 10^12 s"
            throw ServiceError(.staleTimestamp,
                "The request timestamp is \(distance) away from server time; at most \(Int64(RequestSigning.allowedClockSkew)) s is accepted.",
                details: ["serverTime": .int(Int64(now.timeIntervalSince1970))])
        }
        guard RequestSigning.isValidNonce(nonce) else {
            throw ServiceError.invalidSignature("\(RequestSigning.Header.nonce) must be 16 to 64 characters of A-Z, a-z, 0-9, '-' and '_'.")
        }
        guard let key = try await services.applications.signingKey(id: keyId) else {
            throw ServiceError.invalidCredentials("Unknown or revoked app key '\(keyId)'.")
        }
        let deviceId = headers.deviceId
        let stringToSign = RequestSigning.stringToSign(
            method: request.method.rawValue, pathAndQuery: request.head.path ?? "/", timestamp: timestamp, nonce: nonce,
            bodySHA256Hex: SHA256.hash(data: body.readableBytesView).hexString, deviceId: deviceId)
        var mac = Self.keyedMACs.mac(keyId: key.keyId, secret: key.secret)
        mac.update(data: Array(stringToSign.utf8))
        // `==` with bytes compares in constant time.
        guard let signature = Data(hex: signatureHex), mac.finalize() == signature else {
            throw ServiceError.invalidSignature("The request signature does not match.")
        }

        let nonceRecord = SignedRequestRecord(keyId: keyId, nonce: nonce, signedAt: Date(timeIntervalSince1970: Double(timestamp)), receivedAt: now)
        guard requireDevice else { return .appKey(applicationId: key.applicationId, stringToSign: stringToSign, nonce: nonceRecord, spent: false) }
        guard let deviceId, let credential = headers.deviceCredential else {
            throw ServiceError.invalidCredentials(
                "Send \(RequestSigning.Header.deviceId) and \(RequestSigning.Header.deviceCredential) from the registration.")
        }
        let (record, openCommands) = try await services.devices.authenticate(
            applicationId: key.applicationId, deviceId: deviceId, credential: credential)
        // A route naming a device must name the caller: a device acts only as itself.
        if let named = pathDeviceId, named != deviceId {
            throw ServiceError.forbidden("A device may act only as itself: '\(deviceId)' cannot act on '\(named)'.")
        }
        let device = AuthenticatedDevice(applicationId: key.applicationId, deviceId: deviceId)
        return .device(SignedRequest(device: device, record: record, openCommands: openCommands, nonce: nonceRecord), spent: false)
    }
}

/// Spends a signed request's nonce before the route's handler runs, refusing a replay (401
/// `nonce_reused`), and notes a device as seen once its request is accepted (`LastSeenLog`,
/// written in batches). For every signed route but those whose service spends the nonce in its
/// own write (`CallerGroups.signedByDeviceSpentByService`).
struct SpendNonceMiddleware: RouterMiddleware {
    typealias Context = BackplaneRequestContext

    let services: BackplaneServices

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        switch context.identity {
        case .appKey(let applicationId, let stringToSign, let nonce, spent: false)?:
            try await services.applications.spend(nonce)
            context.identity = .appKey(applicationId: applicationId, stringToSign: stringToSign, nonce: nonce, spent: true)
        case .device(let signed, spent: false)?:
            try await services.applications.spend(signed.nonce)
            services.lastSeen.saw(applicationId: signed.device.applicationId, deviceId: signed.device.deviceId, at: services.now())
            context.identity = .device(signed, spent: true)
        default:
            break
        }
        return try await next(request, context)
    }
}

/// `Authorization: Bearer <token>` with the one scope a route group needs.
struct BearerTokenMiddleware: RouterMiddleware {
    typealias Context = BackplaneRequestContext

    let services: BackplaneServices
    let scope: TokenScope

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let authorization = request.headers[.authorization],
              authorization.lowercased().hasPrefix("bearer ")
        else {
            throw ServiceError.invalidCredentials("Send 'Authorization: Bearer <token>' with a token of scope '\(scope.rawValue)'.")
        }
        let token = authorization.dropFirst("bearer ".count).trimmingCharacters(in: .whitespaces)
        let record = try await services.applications.authenticate(bearer: token, now: services.now())
        guard record.scope == scope else {
            throw ServiceError(.forbidden,
                "This route needs a token of scope '\(scope.rawValue)'; this token has scope '\(record.scope.rawValue)'.",
                details: ["requiredScope": .string(scope.rawValue)])
        }
        var context = context
        context.identity = .token(applicationId: record.applicationId)
        return try await next(request, context)
    }
}

/// HMAC-SHA256 states already keyed with each app key's secret. Keying hashes the secret's
/// padded blocks on every request; a copy of the keyed state skips it. Keyed by key id and
/// checked against the secret, so a key id can never use another secret's state; at most
/// `limit` keys, forgotten all at once when full (an application has a handful).
final class KeyedMACs: Sendable {
    private let states = Mutex<[String: (secret: String, mac: HMAC<SHA256>)]>([:])
    private let limit = 1_024

    func mac(keyId: String, secret: String) -> HMAC<SHA256> {
        if let known = states.withLock({ $0[keyId] }), known.secret == secret { return known.mac }
        let mac = HMAC<SHA256>(key: SymmetricKey(data: Data(secret.utf8)))
        states.withLock { states in
            if states.count >= limit { states.removeAll() }
            states[keyId] = (secret, mac)
        }
        return mac
    }
}
