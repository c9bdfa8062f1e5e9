import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOSSL
import Synchronization
import BackplaneWire

/// Posts `ForwardedLicenseMessage`s to applications' license servers. Any device of an
/// application starts a forward, so each is bounded (docs/operations.md, "License servers"):
/// - one deadline (`Options.timeout`, 10 s) for all of it, connection, TLS, head and body, so a
///   server that trickles its answer is cut off like one that never answers;
/// - at most `WireLimits.maxLicenseServerAnswerBytes` read; no redirects followed;
/// - at most `Options.maxInFlight` forwards of the node at once; more are answered 503 at once,
///   so that a slow license server cannot hold the node's connections.
/// A failure tells the device the status the server answered, if any; a network error's detail
/// goes to the log only (it would let any device probe the network behind the backplane).
public final class LicenseServerForwarder: Sendable {
    public struct Options: Sendable, Equatable {
        /// Whether applications may name license servers at all (`--allow-license-servers`): a
        /// URL an application's admin chooses is one the backplane posts to and whose answer a
        /// device reads, so the operator decides, as for key-set URLs.
        public var allowed: Bool
        /// A PEM file of certificate authorities trusted for license servers besides the system's.
        public var trustedCertificateAuthorities: URL?
        public var timeout: Duration
        public var maxInFlight: Int

        public init(
            allowed: Bool = false, trustedCertificateAuthorities: URL? = nil, timeout: Duration = .seconds(10), maxInFlight: Int = 64
        ) {
            self.allowed = allowed
            self.trustedCertificateAuthorities = trustedCertificateAuthorities
            self.timeout = timeout
            self.maxInFlight = max(1, maxInFlight)
        }
    }

    /// What the server said: the bytes for the CDM, or a refusal (a 4xx).
    enum Answer: Sendable, Equatable {
        case answered(Data)
        case refused(status: Int)
    }

    private let options: Options
    private let logger: Logger
    private let inFlight = Mutex(0)

    public init(options: Options = Options(), logger: Logger = Logger(label: "backplane.license-servers")) {
        self.options = options
        self.logger = logger
    }

    /// Posts `message` to `server`. Throws `license_server_failed` (502) when it did not answer
    /// in time, answered a 5xx, a redirect or too much; 503 when too many forwards wait already.
    func forward(_ message: ForwardedLicenseMessage, to server: LicenseServerRecord) async throws -> Answer {
        let admitted = inFlight.withLock { count in
            guard count < options.maxInFlight else { return false }
            count += 1
            return true
        }
        guard admitted else {
            throw ServiceError(.serviceUnavailable, "Too many license requests are waiting for license servers; try again shortly.")
        }
        defer { inFlight.withLock { $0 -= 1 } }
        let (status, body): (Int, Data)
        do {
            (status, body) = try await post(message, to: server)
        } catch let failure as Failure {
            logger.warning("license server did not answer", metadata: [
                "application": "\(server.applicationId)", "system": "\(server.system)", "reason": "\(failure.reason)",
            ])
            throw ServiceError(.licenseServerFailed, "The application's \(server.system) license server did not answer; try again later.")
        }
        switch status {
        case 200..<300: return .answered(body)
        // A timeout or a rate limit is the server's state, not its answer: the device tries again.
        case 400..<500 where status != 408 && status != 429: return .refused(status: status)
        default:
            logger.warning("license server failed", metadata: [
                "application": "\(server.applicationId)", "system": "\(server.system)", "status": "\(status)",
            ])
            throw ServiceError(
                .licenseServerFailed, "The application's \(server.system) license server answered HTTP \(status); try again later.",
                details: ["licenseServerStatus": .int(Int64(status))])
        }
    }

    /// The status and body, all of it within `options.timeout`. The client is this forward's
    /// own: shutting it down closes every connection it opened.
    private func post(_ message: ForwardedLicenseMessage, to server: LicenseServerRecord) async throws -> (Int, Data) {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        let body = try encoder.encode(message)
        let client: HTTPClient
        do {
            client = try BoundedFetch.client(trusting: options.trustedCertificateAuthorities, timeout: options.timeout)
        } catch {
            throw Failure(reason: "the trusted authorities file \(error.path) could not be read")
        }
        let timeout = BoundedFetch.timeAmount(options.timeout)
        var request = HTTPClientRequest(url: server.url)
        request.method = .POST
        for (name, value) in server.headers.sorted(by: { $0.key < $1.key }) { request.headers.add(name: name, value: value) }
        request.headers.replaceOrAdd(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(data: body))
        let deadline = options.timeout
        let prepared = request
        do {
            let answer = try await withinDeadline(deadline) { () async throws -> (Int, Data) in
                let response: HTTPClientResponse
                do {
                    response = try await client.execute(prepared, timeout: timeout)
                } catch {
                    throw Failure(reason: "it could not be reached (\(error))")
                }
                let status = Int(response.status.code)
                if (300..<400).contains(status) { throw Failure(reason: "it answered a redirect (HTTP \(status)), which is not followed") }
                do {
                    return (status, Data(buffer: try await response.body.collect(upTo: WireLimits.maxLicenseServerAnswerBytes)))
                } catch {
                    throw Failure(reason: "its answer is larger than \(WireLimits.maxLicenseServerAnswerBytes) bytes or broke off (\(error))")
                }
            }
            try? await client.shutdown()
            guard let answer else { throw Failure(reason: "it did not answer in full within \(deadline)") }
            return answer
        } catch {
            try? await client.shutdown()
            if Task.isCancelled { throw CancellationError() }
            throw error
        }
    }

    /// Why a forward failed: for the log only.
    private struct Failure: Error {
        let reason: String
    }
}
