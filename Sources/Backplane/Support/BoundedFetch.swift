import AsyncHTTPClient
import Foundation
import NIOCore
import NIOSSL

// Fetches from hosts the backplane does not control, which any holder of an app key or any
// device can start (an application's key-set URL, its license servers): each has one client of
// its own (shutting it down closes every connection it opened), trusts the operator's extra
// authorities, follows no redirect, and runs under one deadline for all of it.
enum BoundedFetch {
    /// Why a client could not be made: the trusted authorities file did not read.
    struct AuthoritiesUnreadable: Error {
        let path: String
    }

    /// A client whose connect and read timeouts are `timeout`, trusting `authorities` besides
    /// the system's, following no redirect; HTTP/2 where the server offers it.
    static func client(trusting authorities: URL?, timeout: Duration) throws(AuthoritiesUnreadable) -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let authorities {
            do {
                tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMFile(authorities.path))]
            } catch {
                throw AuthoritiesUnreadable(path: authorities.path)
            }
        }
        let amount = timeAmount(timeout)
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow, timeout: .init(connect: amount, read: amount))
        configuration.httpVersion = .automatic
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    static func timeAmount(_ duration: Duration) -> TimeAmount {
        .nanoseconds(Int64(duration.components.seconds) * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }
}

/// Runs `work` under one deadline for all of it: nil when the deadline passes first, and `work`
/// is then cancelled. For a fetch from a host the backplane does not control, where the client's
/// own timeouts bound each step but not a body that trickles in.
func withinDeadline<T: Sendable>(_ deadline: Duration, _ work: @escaping @Sendable () async throws -> T) async throws -> T? {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await work() }
        group.addTask {
            try await Task.sleep(for: deadline)
            return nil
        }
        defer { group.cancelAll() }
        return try await group.next() ?? nil
    }
}
