import AsyncHTTPClient
import Foundation
import NIOCore
import NIOSSL
import BackplaneWire

/// Key sets that applications publish at a URL (`jwksUrl`), fetched and cached per URL: for as
/// long as the answer's `Cache-Control: max-age` says (clamped to 1 minute ... 1 day; 5 minutes
/// without one), and again when a token names a key the set does not hold, at most once a
/// minute per URL. A set that cannot be fetched again is used until a fetch succeeds.
///
/// The URL is a tenant's: fetching it is a request-forgery surface, so a backplane does it only
/// when its operator allows (`serve --allow-jwks-url`), over https, without following
/// redirects, within 5 s, and reads at most `maxBytes` of the answer.
actor JWKSFetcher {
    struct Options: Sendable {
        /// A PEM file of certificate authorities trusted for key-set URLs besides the system's.
        var trustedCertificateAuthorities: URL?
    }

    static let maxBytes = 256 * 1024
    static let refetchInterval: TimeInterval = 60
    static let defaultLifetime: TimeInterval = 300
    static let maxLifetime: TimeInterval = 86_400

    private struct Entry {
        var keys: UserTokenKeys
        var expiresAt: Date
        var fetchedAt: Date
    }

    private let options: Options
    private let now: @Sendable () -> Date
    private var entries: [String: Entry] = [:]

    init(options: Options, now: @escaping @Sendable () -> Date) {
        self.options = options
        self.now = now
    }

    /// The keys at `url`: cached while fresh, fetched again when stale, or when `missingKid` is
    /// named and the last fetch is a minute old. 503 when none could ever be fetched.
    func keys(at url: String, missingKid: String? = nil) async throws -> UserTokenKeys {
        let now = now()
        if let entry = entries[url] {
            let stale = entry.expiresAt <= now
            let lookAgain = missingKid.map { !entry.keys.hasKey(id: $0) } ?? false
            guard (stale || lookAgain), now.timeIntervalSince(entry.fetchedAt) >= Self.refetchInterval else { return entry.keys }
            do {
                return try await fetch(url, at: now)
            } catch {
                // The keys held are still the application's best knowledge; look again in a minute.
                entries[url]?.fetchedAt = now
                return entry.keys
            }
        }
        return try await fetch(url, at: now)
    }

    private func fetch(_ url: String, at now: Date) async throws -> UserTokenKeys {
        let (body, maxAge) = try await download(url)
        let jwks: JSONValue
        do {
            jwks = try JSONDecoder().decode(JSONValue.self, from: body)
        } catch {
            throw Self.unavailable(url, "its answer is not JSON")
        }
        let keys = try await UserTokenKeys.make(jwks: jwks, secret: nil, strict: false)
        let lifetime = min(max(maxAge ?? Self.defaultLifetime, Self.refetchInterval), Self.maxLifetime)
        entries[url] = Entry(keys: keys, expiresAt: now.addingTimeInterval(lifetime), fetchedAt: now)
        return keys
    }

    private func download(_ url: String) async throws -> (Data, TimeInterval?) {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let authorities = options.trustedCertificateAuthorities {
            do {
                tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMFile(authorities.path))]
            } catch {
                throw Self.unavailable(url, "the trusted authorities file \(authorities.path) could not be read")
            }
        }
        let client = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: HTTPClient.Configuration(
                tlsConfiguration: tls, redirectConfiguration: .disallow,
                timeout: .init(connect: .seconds(5), read: .seconds(5))))
        do {
            let answer = try await Self.get(url, with: client)
            try await client.shutdown()
            return answer
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    private static func get(_ url: String, with client: HTTPClient) async throws -> (Data, TimeInterval?) {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Accept", value: "application/json")
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, timeout: .seconds(5))
        } catch {
            throw unavailable(url, "it could not be reached (\(error))")
        }
        guard response.status == .ok else { throw unavailable(url, "it answered HTTP \(response.status.code)") }
        let body: ByteBuffer
        do {
            body = try await response.body.collect(upTo: maxBytes)
        } catch {
            throw unavailable(url, "its answer is larger than \(maxBytes) bytes or broke off")
        }
        return (Data(buffer: body), maxAge(response.headers["Cache-Control"].joined(separator: ",")))
    }

    /// `max-age` of a Cache-Control value; 0 for `no-store` or `no-cache` (the minimum applies).
    static func maxAge(_ cacheControl: String) -> TimeInterval? {
        var age: TimeInterval?
        for directive in cacheControl.split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            switch parts[0] {
            case "no-store", "no-cache": return 0
            case "max-age" where parts.count == 2:
                // Digits only, bounded before conversion: the header is the origin's to write.
                let digits = parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                guard !digits.isEmpty, digits.count <= 9, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let seconds = Int(digits), seconds >= 0 else { continue }
                age = TimeInterval(seconds)
            default: continue
            }
        }
        return age
    }

    static func unavailable(_ url: String, _ reason: String) -> ServiceError {
        ServiceError(.serviceUnavailable,
            "The application's key set at \(url) could not be fetched: \(reason). User tokens cannot be checked until it can.")
    }
}
