import AsyncHTTPClient
import Backplane
import BackplaneWire
import Foundation
import JWTKit
import Synchronization

/// An application's DRM license server, as the backplane forwards to it: over HTTPS (HTTP/2), it
/// reads a `ForwardedLicenseMessage`, fetches the backplane's published entitlement keys and
/// verifies a license's entitlement (grant, device, asset) before it answers; it answers opaque
/// bytes (`answer(to:)`), and records every message with its API key and verified claims.
public final class TestLicenseServer: Sendable {
    public struct Received: Sendable {
        public var message: ForwardedLicenseMessage
        public var apiKey: String?
        /// The entitlement's claims, when it verified against the backplane's published keys.
        public var verified: EntitlementClaims?
    }

    /// What it received, and how it answers next.
    private final class State: Sendable {
        let value = Mutex<(received: [Received], status: Int, delay: Duration, padding: Int)>(([], 200, .zero, 0))

        func withLock<T: Sendable>(_ body: (inout (received: [Received], status: Int, delay: Duration, padding: Int)) -> T) -> T {
            value.withLock { body(&$0) }
        }
    }

    private let server: LocalHTTP2Server
    private let state: State

    public var port: Int { server.port }
    public var received: [Received] { state.withLock { $0.received } }

    /// What it answers: the server's bytes for a message of `kind` with `payload` (not UTF-8, so
    /// that "unchanged" means byte for byte).
    public static func answer(to kind: ForwardedLicenseMessage.Kind, payload: Data) -> Data {
        Data([0xFF, 0x00, 0xFE]) + Data(kind.rawValue.utf8) + payload
    }

    private init(server: LocalHTTP2Server, state: State) {
        self.server = server
        self.state = state
    }

    /// Serves with `certificates`; `backplane` is the base URL its entitlement keys are read from.
    public static func start(_ certificates: TestCertificates.Made, backplane: @escaping @Sendable () -> String) async throws -> TestLicenseServer {
        let state = State()
        let server = try await LocalHTTP2Server.start(certificate: certificates.certificate, privateKey: certificates.privateKey) { request in
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            guard request.method == "POST", request.header("content-type") == "application/json",
                let message = try? decoder.decode(ForwardedLicenseMessage.self, from: request.body)
            else { return .json(400, #"{"error":"not a forwarded message"}"#) }
            var claims: EntitlementClaims?
            if let token = message.entitlement {
                let url = "\(backplane())/v1/applications/\(message.applicationId)/entitlement-keys"
                if let response = try? await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(10)),
                    let body = try? await response.body.collect(upTo: 1 << 16),
                    let keys = try? await JWTKeyCollection().add(jwksJSON: String(buffer: body)),
                    let verified = try? await keys.verify(token, as: EntitlementClaims.self),
                    verified.jti == message.grantId, verified.deviceId == message.deviceId, verified.assetId == message.assetId
                {
                    claims = verified
                }
            }
            let (status, delay, padding) = state.withLock { state in
                state.received.append(Received(message: message, apiKey: request.header("x-api-key"), verified: claims))
                return (state.status, state.delay, state.padding)
            }
            if delay > .zero { try? await Task.sleep(for: delay) }
            guard message.kind != .license || claims != nil else { return .json(403, #"{"error":"entitlement"}"#) }
            let payload = Data(base64Encoded: message.payload ?? "") ?? Data()
            return LocalHTTP2Server.Answer(
                status: status, headers: [("content-type", "application/octet-stream")],
                body: answer(to: message.kind, payload: payload) + Data(count: padding))
        }
        return TestLicenseServer(server: server, state: state)
    }

    /// How the next answers go: their status, after `delay`, with `padding` more bytes.
    public func answer(status: Int, after delay: Duration = .zero, padding: Int = 0) {
        state.withLock { $0.status = status; $0.delay = delay; $0.padding = padding }
    }

    public func stop() async {
        await server.stop()
    }
}
