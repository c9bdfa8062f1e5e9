import Crypto
import Synchronization
import Foundation
import HTTPTypes
import Hummingbird
import BackplaneWire

/// Verifies signed device requests (`RequestSigning` in BackplaneWire, documented in docs/openapi.yaml): the app key's
/// HMAC over method, path and query, timestamp, nonce, body hash and device id; a timestamp
/// within ±5 minutes; a nonce never seen before with that key. With `requireDevice`, the request
/// must also carry a valid device credential, and then the caller is that device and no other;
/// the device is noted as seen once its request is accepted (`LastSeenLog`, written in batches).
struct SignedRequestMiddleware: RouterMiddleware {
    typealias Context = BackplaneRequestContext

    let services: BackplaneServices
    let requireDevice: Bool
    /// Checked once the device is proven: a forged device id cannot spend another's requests.
    let deviceLimiter: RateLimiter
    /// Leave the nonce to the handler (`DeviceRequestContext.nonceToRecord`), which records it in
    /// the same transaction as its own write: one commit per request instead of two. Only for
    /// routes whose replay is harmless before that write (a request refused earlier keeps its
    /// nonce unspent and would only be refused again).
    var handlerRecordsNonce = false
    /// Read the device's open commands with the device, in the credential check's one round
    /// trip: for the sync, which answers them (`DeviceRead`).
    var readsOpenCommands = false

    private var store: any BackplaneStore { services.store }
    private static let keyedMACs = KeyedMACs()

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var request = request
        var context = context
        // The body is read once here (bounded) to hash it; handlers decode the same buffer.
        let body = try await request.collectBody(upTo: WireLimits.maxBodyBytes)
        let named = context.parameters.get("deviceId").map { $0.removingPercentEncoding ?? $0 }
        let (identity, signed) = try await verify(request, body: body, pathDeviceId: named)
        if case .device(let device, _, _) = identity, let wait = deviceLimiter.take("\(device.applicationId)/\(device.deviceId)") {
            // Before the nonce is spent: the device may send the same request again later.
            services.metrics.rateLimited(scope: "device")
            throw BackplaneError.rateLimited("device", retryAfter: wait)
        }
        services.credentialUse.usedKey(signed.keyId, at: services.now())
        if handlerRecordsNonce, case .device(let device, _, let read) = identity {
            context.identity = .device(device, nonceToRecord: signed, read: read)
            let response = try await next(request, context)
            services.lastSeen.saw(applicationId: device.applicationId, deviceId: device.deviceId, at: services.now())
            return response
        }
        try await store.spend(signed)
        if case .device(let device, _, _) = identity {
            services.lastSeen.saw(applicationId: device.applicationId, deviceId: device.deviceId, at: services.now())
        }
        context.identity = identity
        return try await next(request, context)
    }

    /// Every check but the nonce's freshness; returns who signed and the nonce to record, last, so
    /// that only a request that passed every other check uses up its nonce.
    private func verify(_ request: Request, body: ByteBuffer, pathDeviceId: String?) async throws -> (Identity, SignedRequestRecord) {
        let headers = SigningHeaders(request.headers)
        guard let keyId = headers.keyId,
              let timestampText = headers.timestamp,
              let nonce = headers.nonce,
              let signatureHex = headers.signature
        else {
            throw BackplaneError.invalidSignature(
                "Device requests must be signed: send \(RequestSigning.Header.keyId), \(RequestSigning.Header.timestamp), "
                    + "\(RequestSigning.Header.nonce) and \(RequestSigning.Header.signature).")
        }
        guard let timestamp = Int64(timestampText) else {
            throw BackplaneError.invalidSignature("\(RequestSigning.Header.timestamp) must be Unix seconds.")
        }
        let now = services.now()
        // In Double: any Int64 minus the server time is finite, where Int64 arithmetic could
        // overflow. The skew is printed only when it is a sane number of seconds.
        let skew = abs(now.timeIntervalSince1970 - Double(timestamp))
        guard skew <= RequestSigning.allowedClockSkew else {
            let distance = skew < 1e12 ? "\(Int64(skew)) s" : "more than 10^12 s"
            throw BackplaneError(.unauthorized, .staleTimestamp,
                "The request timestamp is \(distance) away from server time; at most \(Int64(RequestSigning.allowedClockSkew)) s is accepted.",
                details: ["serverTime": .int(Int64(now.timeIntervalSince1970))])
        }
        guard RequestSigning.isValidNonce(nonce) else {
            throw BackplaneError.invalidSignature("\(RequestSigning.Header.nonce) must be 16 to 64 characters of A-Z, a-z, 0-9, '-' and '_'.")
        }
        guard let key = try await store.appKey(id: keyId), key.revokedAt == nil else {
            throw BackplaneError.invalidCredentials("Unknown or revoked app key '\(keyId)'.")
        }
        let deviceId = headers.deviceId
        let stringToSign = RequestSigning.stringToSign(
            method: request.method.rawValue, pathAndQuery: request.head.path ?? "/", timestamp: timestamp, nonce: nonce,
            bodySHA256Hex: SHA256.hash(data: body.readableBytesView).hexString, deviceId: deviceId)
        var mac = Self.keyedMACs.mac(keyId: key.keyId, secret: key.secret)
        mac.update(data: Array(stringToSign.utf8))
        // `==` with bytes compares in constant time.
        guard let signature = Data(hex: signatureHex), mac.finalize() == signature else {
            throw BackplaneError.invalidSignature("The request signature does not match.")
        }

        var identity = Identity.appKey(applicationId: key.applicationId, stringToSign: stringToSign)
        if requireDevice {
            guard let deviceId, let credential = headers.deviceCredential else {
                throw BackplaneError.invalidCredentials(
                    "Send \(RequestSigning.Header.deviceId) and \(RequestSigning.Header.deviceCredential) from the registration.")
            }
            let read = try await services.devices.authenticate(
                applicationId: key.applicationId, deviceId: deviceId, credential: credential, withOpenCommands: readsOpenCommands)
            // A route naming a device must name the caller: a device acts only as itself.
            if let named = pathDeviceId, named != deviceId {
                throw BackplaneError.forbidden("A device may act only as itself: '\(deviceId)' cannot act on '\(named)'.")
            }
            identity = .device(AuthenticatedDevice(applicationId: key.applicationId, deviceId: deviceId), nonceToRecord: nil, read: read)
        }
        let signed = SignedRequestRecord(keyId: keyId, nonce: nonce, signedAt: Date(timeIntervalSince1970: Double(timestamp)), receivedAt: now)
        return (identity, signed)
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
            throw BackplaneError.invalidCredentials("Send 'Authorization: Bearer <token>' with a token of scope '\(scope.rawValue)'.")
        }
        let token = authorization.dropFirst("bearer ".count).trimmingCharacters(in: .whitespaces)
        let record = try await services.applications.authenticate(bearer: token, now: services.now())
        guard record.scope == scope else {
            throw BackplaneError(.forbidden, .forbidden,
                "This route needs a token of scope '\(scope.rawValue)'; this token has scope '\(record.scope.rawValue)'.",
                details: ["requiredScope": .string(scope.rawValue)])
        }
        var context = context
        context.identity = .token(applicationId: record.applicationId)
        return try await next(request, context)
    }
}

/// HMAC-SHA256 states already keyed with each app key's secret. Keying hashes the secret's
/// padded blocks, half of checking a signature in a profile; a copy of the keyed state skips it. Keyed by
/// key id and checked against the secret, so a key id can never use another secret's state; at
/// most `limit` keys, forgotten all at once when full (an application has a handful).
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
