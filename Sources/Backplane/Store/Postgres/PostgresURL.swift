import Foundation
import NIOSSL
import PostgresNIO

/// A `postgres://user:password@host:port/database?sslmode=…` URL, as libpq and most hosting
/// providers write it, turned into the client's configuration.
///
/// - `sslmode`, as libpq's: `disable`; `prefer` (the default: TLS when the server offers it);
///   `require` (TLS or nothing; neither checks the certificate); `verify-full` (TLS with the
///   certificate and host name verified against the system's roots).
/// - `pool_max`: the most connections this node opens (default 20, at least 2: one listens for
///   the other nodes' wake-ups).
/// A password may also come from `PGPASSWORD`, so it need not appear on a command line.
public struct PostgresURL: Sendable, CustomStringConvertible {
    public let configuration: PostgresClient.Configuration
    /// The URL without its password, for logs and messages.
    public let description: String

    public init(_ text: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        guard let url = URLComponents(string: text), ["postgres", "postgresql"].contains(url.scheme ?? "") else {
            throw Invalid("expected postgres://user:password@host:port/database")
        }
        guard let host = url.host, !host.isEmpty else { throw Invalid("the URL names no host") }
        guard let user = url.user, !user.isEmpty else { throw Invalid("the URL names no user") }
        let port = url.port ?? 5432
        guard (1...65535).contains(port) else { throw Invalid("port \(port) is out of range") }
        let database = String(url.path.drop { $0 == "/" })
        let password = url.password ?? environment["PGPASSWORD"]
        var options: [String: String] = [:]
        for item in url.queryItems ?? [] { options[item.name] = item.value ?? "" }

        // As libpq: `prefer` and `require` encrypt without checking the certificate (a stock
        // server's is self-signed); `verify-full` checks it and the host name.
        var unverified = TLSConfiguration.makeClientConfiguration()
        unverified.certificateVerification = .none
        let tls: PostgresClient.Configuration.TLS
        switch options.removeValue(forKey: "sslmode") ?? "prefer" {
        case "disable": tls = .disable
        case "prefer": tls = .prefer(unverified)
        case "require": tls = .require(unverified)
        case "verify-full": tls = .require(.makeClientConfiguration())
        case let other: throw Invalid("sslmode \(other) is not one of disable, prefer, require, verify-full")
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: user, password: password, database: database.isEmpty ? nil : database, tls: tls)
        if let text = options.removeValue(forKey: "pool_max") {
            // One connection is the wake-up listener's, held for as long as the node runs.
            guard let maximum = Int(text), (2...1000).contains(maximum) else { throw Invalid("pool_max must be 2 to 1000") }
            configuration.options.maximumConnections = maximum
        }
        if let unknown = options.keys.sorted().first { throw Invalid("unknown option \(unknown)") }
        self.configuration = configuration

        var shown = url
        if shown.password != nil { shown.password = "***" }
        self.description = shown.string ?? "postgres://\(host)"
    }

    public struct Invalid: Error, CustomStringConvertible {
        public let description: String
        init(_ reason: String) { description = "Invalid database URL: \(reason)." }
    }
}
