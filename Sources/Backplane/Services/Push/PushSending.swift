import AsyncHTTPClient
import Foundation
import JWTKit
import NIOCore
import NIOSSL
import Synchronization
import BackplaneWire

/// What a provider made of one push (`APNsSender`, `FCMSender`); `PushDispatcher` acts on it.
enum PushResult: Sendable, Equatable {
    case delivered
    /// The token is dead (uninstalled app, token for nothing): the device's token is dropped.
    case tokenRejected(reason: String)
    /// Worth another try later (429, 5xx, no answer); `after` when the provider said how long.
    case retry(reason: String, after: Duration?)
    /// The provider refused the application's credentials: no device would get through.
    case credentialsRefused(reason: String)
    /// Refused for another reason; trying again would not help.
    case failed(reason: String)
}

/// One push: a device's token and the credentials of its application for the provider.
struct PushTarget: Sendable {
    var applicationId: String
    var deviceId: String
    var token: String
    var credentials: PushCredentialsRecord
}

/// The providers' HTTP clients: HTTP/2 over TLS (negotiated by ALPN), the operator's extra
/// certificate authorities trusted, no redirects followed.
enum PushHTTP {
    /// Largest answer read from a provider: their error bodies are a few hundred bytes.
    static let maxAnswerBytes = 64 * 1024
    static let requestTimeout: TimeAmount = .seconds(15)

    static func client(trusting authorities: URL?) throws -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let authorities {
            tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMFile(authorities.path))]
        }
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow, timeout: .init(connect: .seconds(10), read: .seconds(15)))
        configuration.httpVersion = .automatic
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// Sends `request`; the status, the body (up to `maxAnswerBytes`) and `Retry-After` in seconds
    /// when it is a plain number up to a day.
    static func send(_ request: HTTPClientRequest, with client: HTTPClient) async throws -> (status: Int, body: Data, retryAfter: Duration?) {
        let response = try await client.execute(request, timeout: requestTimeout)
        let body = try await response.body.collect(upTo: maxAnswerBytes)
        var retryAfter: Duration?
        if let text = response.headers.first(name: "retry-after"), text.utf8.count <= 5, let seconds = Int(text), (0...86_400).contains(seconds) {
            retryAfter = .seconds(seconds)
        }
        return (Int(response.status.code), Data(buffer: body), retryAfter)
    }

    /// A provider's answer as retry or failure, by status: what the provider-specific reading left.
    static func byStatus(_ status: Int, reason: String, retryAfter: Duration?) -> PushResult {
        switch status {
        case 429, 500...599: .retry(reason: reason, after: retryAfter)
        default: .failed(reason: reason)
        }
    }

    /// A provider's free text, shortened for a log line or a stored reason.
    static func short(_ text: String) -> String {
        String(text.unicodeScalars.filter { !CharacterSet.controlCharacters.contains($0) }.prefix(200).map(Character.init))
    }
}

/// How the push tokens' claims are written: times as whole seconds, as Apple and Google
/// document them (jwt-kit's default writes fractions).
enum PushJWT {
    static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .integerSecondsSince1970
        return encoder
    }
}

/// An application's stored credentials, decoded once for each time they were set rather than
/// once per push (a service account's JSON holds a 1.7 KB key).
final class DecodedCredentials<Value: Decodable & Sendable>: Sendable {
    private let decoded = Mutex<[String: (setAt: Date, value: Value)]>([:])

    func value(of record: PushCredentialsRecord) throws -> Value {
        if let kept = decoded.withLock({ $0[record.applicationId] }), kept.setAt == record.setAt { return kept.value }
        let value = try JSONDecoder().decode(Value.self, from: Data(record.secret.utf8))
        decoded.withLock { $0[record.applicationId] = (record.setAt, value) }
        return value
    }
}
