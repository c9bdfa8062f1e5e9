import Foundation
import PostgresNIO

/// A `postgres://user:password@host:port/database?sslmode=…` URL, as libpq and most hosting
/// providers write it, turned into the client's configuration.
///
/// - `sslmode`: `disable`; `prefer` (the default, as in libpq: TLS when the server offers it);
///   `require` (TLS with the certificate and host name verified against the system's roots).
/// - `pool_max`: the most connections this node opens (default 20).
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

        let tls: PostgresClient.Configuration.TLS
        switch options.removeValue(forKey: "sslmode") ?? "prefer" {
        case "disable": tls = .disable
        case "prefer": tls = .prefer(.makeClientConfiguration())
        case "require": tls = .require(.makeClientConfiguration())
        case let other: throw Invalid("sslmode \(other) is not one of disable, prefer, require")
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: user, password: password, database: database.isEmpty ? nil : database, tls: tls)
        if let text = options.removeValue(forKey: "pool_max") {
            guard let maximum = Int(text), (1...1000).contains(maximum) else { throw Invalid("pool_max must be 1 to 1000") }
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
