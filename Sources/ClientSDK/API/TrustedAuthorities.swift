import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOPosix
import NIOSSL

/// TLS to a backplane whose certificate comes from a private certificate authority (a
/// self-hosted backplane behind a company CA): the authorities in
/// `BackplaneClientConfiguration.trustedCertificateAuthorities` are trusted in addition to the
/// system's. Without them the SDK trusts the system's store alone.
enum TrustedAuthorities {
    /// The client TLS settings trusting the system's authorities and those in `file` (PEM).
    static func tlsConfiguration(trusting file: URL) throws -> TLSConfiguration {
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(file.path)
        } catch {
            throw BackplaneClientError(
                kind: .invalidInput, message: "Cannot read certificate authorities from \(file.path): \(error).", underlying: error)
        }
        guard !certificates.isEmpty else {
            throw BackplaneClientError(kind: .invalidInput, message: "\(file.path) holds no PEM certificate.")
        }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.certificates(certificates)]
        return tls
    }

    /// One HTTP client per file, kept for the life of the process like `HTTPClient.shared`:
    /// engines started again reuse its connections, and nothing has to shut it down.
    static func httpClient(trusting file: URL) throws -> HTTPClient {
        try clients.withLockedValue { clients in
            if let client = clients[file.path] { return client }
            // NIO's own event loops, on every platform: on Apple platforms the default group is
            // Network.framework's, whose TLS would ignore `additionalTrustRoots`.
            let client = HTTPClient(
                eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
                configuration: HTTPClient.Configuration(tlsConfiguration: try tlsConfiguration(trusting: file)))
            clients[file.path] = client
            return client
        }
    }

    private static let clients = NIOLockedValueBox<[String: HTTPClient]>([:])
}
