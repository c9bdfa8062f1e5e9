import Crypto
import NIOSSL
import Foundation
import BackplaneWire

/// A 204 answer.
struct EmptyAnswer: Decodable {}

/// The device's credentials after registration.
struct DeviceCredentials: Sendable, Codable, Equatable {
    var deviceId: String
    var credential: String
}

/// The backplane's device API over a `Transport`: signing, encoding, and turning every failure
/// into a `BackplaneClientError`.
struct BackplaneAPI: Sendable {
    let baseURL: URL
    let keyId: String
    let secret: SymmetricKey
    let transport: any Transport
    /// TLS of the wake-up channel: nil trusts the system's authorities.
    let channelTLS: TLSConfiguration?
    let timeout: Duration
    /// Server time now, as the engine best knows it; signing timestamps use it so that a device
    /// with a wrong clock is not refused as stale.
    let serverNow: @Sendable () -> Date

    init(configuration: BackplaneClientConfiguration, serverNow: @escaping @Sendable () -> Date) throws {
        self.baseURL = configuration.backplaneURL
        self.keyId = configuration.appKeyId
        self.secret = SymmetricKey(data: Data(configuration.appKeySecret.utf8))
        if let authorities = configuration.trustedCertificateAuthorities {
            self.channelTLS = try TrustedAuthorities.tlsConfiguration(trusting: authorities)
            self.transport = try configuration.transport ?? HTTPClientTransport(trusting: authorities)
        } else {
            self.channelTLS = nil
            self.transport = configuration.transport ?? HTTPClientTransport()
        }
        self.timeout = configuration.sync.requestTimeout
        self.serverNow = serverNow
    }

    /// Signed with the app key and, as proof that this is the install holding the device id, with
    /// the device key; `credential` is sent too when the install still holds one.
    /// Repeated on a closed connection like the rest: a repeat of one that arrived is answered
    /// `existing` (where the first was `created`, `moved` or `reactivated`), as the engine's own
    /// next registration would be; not repeating it would only add a failure.
    /// `userToken` goes in `X-Backplane-User-Token` (outside the signature: the token is signed itself).
    func register(
        _ request: RegisterDeviceRequest, deviceKey: P256.Signing.PrivateKey, credential: String?, userToken: String?
    ) async throws -> RegisterDeviceResponse {
        try await send(
            "POST", "/v1/devices/register", body: request, as: nil, proof: DeviceProof(key: deviceKey, credential: credential),
            extraHeaders: userToken.map { [(UserToken.header, $0)] } ?? [])
    }

    func sync(_ request: SyncRequest, as device: DeviceCredentials) async throws -> SyncResponse {
        try await send("POST", "/v1/sync", body: request, as: device)
    }

    func userDevices(as device: DeviceCredentials) async throws -> UserDevicesResponse {
        try await send("GET", "/v1/devices", body: Optional<SyncRequest>.none, as: device)
    }

    func updateProfile(_ update: DeviceProfileUpdate, as device: DeviceCredentials) async throws -> DeviceResponse {
        try await send("PATCH", "/v1/devices/\(Self.segment(device.deviceId))", body: update, as: device)
    }

    func setDownloadEnabled(_ enabled: Bool, as device: DeviceCredentials) async throws -> DeviceResponse {
        try await send("PUT", "/v1/devices/\(Self.segment(device.deviceId))/download-enabled",
                       body: DownloadEnabledRequest(downloadEnabled: enabled), as: device)
    }

    func setSiblingDownloadEnabled(_ enabled: Bool, deviceId: String, as device: DeviceCredentials) async throws -> DeviceResponse {
        try await send("PUT", "/v1/user-devices/\(Self.segment(deviceId))/download-enabled",
                       body: DownloadEnabledRequest(downloadEnabled: enabled), as: device)
    }

    func requestDownloadPermission(_ request: DownloadPermissionRequest, as device: DeviceCredentials) async throws -> DownloadPermissionResponse {
        try await send("POST", "/v1/download-grants", body: request, as: device)
    }

    func setAgreementKey(_ request: AgreementKeyRequest, as device: DeviceCredentials) async throws {
        let _: EmptyAnswer = try await send("PUT", "/v1/devices/\(Self.segment(device.deviceId))/agreement-key", body: request, as: device)
    }

    /// Repeatable: a repeat for the grant the first made answers that grant with another license.
    func requestLicense(_ request: LicenseIssueRequest, as device: DeviceCredentials) async throws -> LicenseIssueResponse {
        try await send("POST", "/v1/licenses", body: request, as: device)
    }

    func releaseLicense(_ licenseId: String, _ request: LicenseReleaseRequest, as device: DeviceCredentials) async throws -> LicenseReleaseResponse {
        try await send("POST", "/v1/licenses/\(Self.segment(licenseId))/release", body: request, as: device)
    }

    /// Not repeated on a closed connection: a repeat of one that arrived is refused (the device is
    /// no longer registered), which would hide that the first succeeded.
    func unregister(as device: DeviceCredentials) async throws -> DeviceResponse {
        try await send(
            "POST", "/v1/devices/\(Self.segment(device.deviceId))/unregister", body: Optional<SyncRequest>.none, as: device, repeatable: false)
    }

    func uploadEvents(_ batch: EventBatch, as device: DeviceCredentials) async throws -> EventBatchResponse {
        try await send("POST", "/v1/events", body: batch, as: device)
    }

    func subscribe(feedId: String, _ request: SubscribeRequest, as device: DeviceCredentials) async throws -> SubscribeResponse {
        try await send("PUT", "/v1/subscriptions/\(Self.segment(feedId))", body: request, as: device)
    }

    /// Not repeated on a closed connection: a repeat of one that arrived would be answered 404.
    func unsubscribe(feedId: String, as device: DeviceCredentials) async throws {
        let _: EmptyAnswer = try await send(
            "DELETE", "/v1/subscriptions/\(Self.segment(feedId))", body: Optional<SyncRequest>.none, as: device, repeatable: false)
    }

    func subscriptions(as device: DeviceCredentials) async throws -> SubscriptionList {
        try await send("GET", "/v1/subscriptions", body: Optional<SyncRequest>.none, as: device)
    }

    func changes(cursor: String?, as device: DeviceCredentials) async throws -> EpisodeChanges {
        let query = cursor.map { "?cursor=\(Self.queryValue($0))" } ?? ""
        return try await send("GET", "/v1/subscriptions/changes\(query)", body: Optional<SyncRequest>.none, as: device)
    }

    func episodes(since: Date, onlySubscribed: Bool, cursor: String?, as device: DeviceCredentials) async throws -> EpisodeList {
        let since = ISO8601DateFormatter().string(from: since)
        let query = "?since=\(Self.queryValue(since))&onlySubscribed=\(onlySubscribed)" + (cursor.map { "&cursor=\(Self.queryValue($0))" } ?? "")
        return try await send("GET", "/v1/feeds/episodes\(query)", body: Optional<SyncRequest>.none, as: device)
    }

    // MARK: plumbing

    /// What a registration adds to prove the install: the device key's signature, the credential held.
    struct DeviceProof {
        var key: P256.Signing.PrivateKey
        var credential: String?
    }

    /// Sends a request and reads its answer. When the connection closes under it
    /// (`ConnectionClosedError`) a `repeatable` one is signed again and sent again, up to
    /// `repeatsOnClosedConnection` times (each closed connection leaves the pool, which may hold
    /// several that the backplane closed when it restarted). Repeating is safe where the answer
    /// to a repeat is the answer to the first (events by sequence, acknowledgements by command
    /// id, reads, `PUT`s that set state) or what a later retry would get anyway (registration);
    /// the two routes where it is neither say so.
    private func send<Body: Encodable, Answer: Decodable>(
        _ method: String, _ route: String, body: Body?, as device: DeviceCredentials?, proof: DeviceProof? = nil,
        extraHeaders: [(name: String, value: String)] = [], repeatable: Bool = true
    ) async throws -> Answer {
        let payload: Data
        do {
            payload = try body.map { try Self.encoder.encode($0) } ?? Data()
        } catch {
            throw BackplaneClientError(kind: .invalidResponse, message: "Could not encode the request.", underlying: error)
        }
        let (url, pathAndQuery) = try url(for: route)

        let response: TransportResponse
        var repeats = 0
        while true {
            // Signed for each send: if an earlier one did arrive, its nonce is spent.
            let request = TransportRequest(
                method: method, url: url,
                headers: try headers(method: method, pathAndQuery: pathAndQuery, body: payload, device: device, proof: proof) + extraHeaders,
                body: payload, timeout: timeout)
            do {
                response = try await transport.send(request)
                break
            } catch is ConnectionClosedError where repeatable && repeats < Self.repeatsOnClosedConnection {
                repeats += 1
            } catch {
                let message = NetworkErrorText.isTimeout(error)
                    ? "The backplane at \(baseURL.absoluteString) did not answer within \(timeout.components.seconds) s (timed out)."
                    : "Could not reach the backplane at \(baseURL.absoluteString): \(NetworkErrorText.clause(error))."
                throw BackplaneClientError(kind: .communicationsFailure, message: message, underlying: error)
            }
        }
        guard (200..<300).contains(response.status) else {
            if let error = try? Self.decoder.decode(ErrorBody.self, from: response.body) {
                throw BackplaneClientError(
                    kind: .server, code: error.error.code, status: response.status, message: error.error.message, details: error.error.details)
            }
            // Not the backplane's error body: a proxy or load balancer answered.
            let kind: BackplaneClientError.Kind = response.status >= 500 ? .communicationsFailure : .invalidResponse
            throw BackplaneClientError(kind: kind, status: response.status, message: "HTTP \(response.status) without an error body.")
        }
        if Answer.self == EmptyAnswer.self, let empty = EmptyAnswer() as? Answer { return empty }
        do {
            return try Self.decoder.decode(Answer.self, from: response.body)
        } catch {
            throw BackplaneClientError(
                kind: .invalidResponse, status: response.status, message: "Could not read the backplane's answer.", underlying: error)
        }
    }

    static let repeatsOnClosedConnection = 2

    /// The URL of a route under the base URL, and the path as it goes on the request line (and into the signature).
    func url(for route: String) throws -> (URL, String) {
        let basePath = baseURL.path.hasSuffix("/") ? String(baseURL.path.dropLast()) : baseURL.path
        let pathAndQuery = basePath + route
        guard var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: false) else {
            throw BackplaneClientError(kind: .invalidResponse, message: "Invalid backplane URL \(baseURL).")
        }
        let parts = pathAndQuery.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        components.percentEncodedPath = String(parts[0])
        components.percentEncodedQuery = parts.count > 1 ? String(parts[1]) : nil
        guard let url = components.url else {
            throw BackplaneClientError(kind: .invalidResponse, message: "Invalid backplane URL \(baseURL).")
        }
        return (url, pathAndQuery)
    }

    func headers(
        method: String, pathAndQuery: String, body: Data, device: DeviceCredentials?, proof: DeviceProof? = nil
    ) throws -> [(name: String, value: String)] {
        let secret = secret
        let signed = try RequestSigning.headers(
            keyId: keyId, method: method, pathAndQuery: pathAndQuery, bodySHA256Hex: RequestSigning.hex(SHA256.hash(data: body)),
            timestamp: Int64(serverNow().timeIntervalSince1970.rounded()), nonce: Self.nonce(),
            deviceId: device?.deviceId, credential: device?.credential ?? proof?.credential,
            mac: { HMAC<SHA256>.authenticationCode(for: Data($0.utf8), using: secret).withUnsafeBytes { RequestSigning.hex($0) } },
            proof: proof.map { proof in
                { stringToSign in
                    do {
                        return Base64URL.encode(try proof.key.signature(for: Data(stringToSign.utf8)).rawRepresentation)
                    } catch {
                        throw BackplaneClientError(kind: .localStorage, message: "Could not sign with the device key.", underlying: error)
                    }
                }
            })
        return [("Content-Type", "application/json")] + signed
    }

    static func nonce() -> String {
        var generator = SystemRandomNumberGenerator()
        return RequestSigning.hex((0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }

    /// A query parameter value, percent-encoded.
    static func queryValue(_ value: String) -> String {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&=+?#")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }

    /// A device id as one path segment.
    static func segment(_ value: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove("/")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }

    static var encoder: JSONEncoder { WireJSON.encoder() }
    static var decoder: JSONDecoder { WireJSON.decoder() }
}
