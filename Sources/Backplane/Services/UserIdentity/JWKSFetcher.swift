import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOSSL
import BackplaneWire

/// Key sets that applications publish at a URL (`jwksUrl`), fetched and cached per URL: for as
/// long as the answer's `Cache-Control: max-age` says (clamped to 1 minute ... 1 day; 5 minutes
/// without one), and again when a token names a key the set does not hold, at most once a
/// minute per URL. A set that cannot be fetched again is used until a fetch succeeds.
///
/// The URL is a tenant's, and a fetch starts before a token's signature can be checked, so any
/// holder of the app key can start one. Hence every fetch is bounded (docs/operations.md, "Verified users"):
/// - over https, without following redirects, at most `maxBytes` read;
/// - one deadline (`Options.timeout`, 5 s) for all of it: connection, TLS, head and body, so a host
///   that trickles its answer is cut off like one that never answers;
/// - one fetch in flight per URL, whatever the number of registrations waiting for it, and that
///   fetch is cancelled (its connection closed) once no registration waits for it any more;
/// - a failure is remembered for `failureMemory`: registrations meanwhile are refused at once;
/// - at most `Options.maxWaiting` registrations of the node wait for fetches; more are refused at
///   once, so a slow key-set host cannot hold the node's connections.
/// A refusal says only that the key set could not be fetched: the reason (a network error, a TLS
/// error, a redirect) would let any holder of the app key probe the network behind the server,
/// so it goes to the log.
actor JWKSFetcher {
    struct Options: Sendable {
        /// A PEM file of certificate authorities trusted for key-set URLs besides the system's.
        var trustedCertificateAuthorities: URL?
        var timeout: Duration = .seconds(5)
        var maxWaiting: Int = 64
    }

    static let maxBytes = 256 * 1024
    static let refetchInterval: TimeInterval = 60
    static let defaultLifetime: TimeInterval = 300
    static let maxLifetime: TimeInterval = 86_400
    static let failureMemory: TimeInterval = 15

    private struct Entry {
        var keys: UserTokenKeys
        var expiresAt: Date
        var fetchedAt: Date
    }

    /// A fetch in flight and the registrations waiting for it.
    private struct Flight {
        let id: UInt64
        let task: Task<Void, Never>
        var waiters: [UInt64: CheckedContinuation<UserTokenKeys, any Error>]
    }

    private let options: Options
    private let now: @Sendable () -> Date
    private let logger: Logger
    private var entries: [String: Entry] = [:]
    private var failedUntil: [String: Date] = [:]
    private var flights: [String: Flight] = [:]
    private var nextId: UInt64 = 0
    private var waiting = 0

    init(options: Options, now: @escaping @Sendable () -> Date, logger: Logger = Logger(label: "backplane.user-identity")) {
        self.options = options
        self.now = now
        self.logger = logger
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
                return try await joinFetch(url)
            } catch {
                // The keys held are still the application's best knowledge; look again in a minute.
                entries[url]?.fetchedAt = now
                return entries[url]?.keys ?? entry.keys
            }
        }
        if let until = failedUntil[url], until > now { throw Self.unavailable }
        return try await joinFetch(url)
    }

    /// Waits for the fetch of `url` in flight, starting it if there is none. A waiter that is
    /// cancelled (its client went away) stops waiting at once; the fetch is cancelled, and its
    /// connection closed, with its last waiter.
    private func joinFetch(_ url: String) async throws -> UserTokenKeys {
        guard waiting < options.maxWaiting else {
            logger.warning("key-set fetch refused: \(options.maxWaiting) registrations already wait for key sets", metadata: ["jwks_url": "\(url)"])
            throw Self.unavailable
        }
        nextId &+= 1
        let waiter = nextId
        waiting += 1
        defer { waiting -= 1 }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                // Cancelled before the handler below could find this waiter.
                guard !Task.isCancelled else { return continuation.resume(throwing: CancellationError()) }
                wait(for: url, waiter, continuation)
            }
        } onCancel: {
            Task { await self.stopWaiting(for: url, waiter) }
        }
    }

    private func wait(for url: String, _ waiter: UInt64, _ continuation: CheckedContinuation<UserTokenKeys, any Error>) {
        if flights[url] != nil {
            flights[url]?.waiters[waiter] = continuation
            return
        }
        nextId &+= 1
        let id = nextId
        flights[url] = Flight(id: id, task: Task { await self.fly(url, id) }, waiters: [waiter: continuation])
    }

    private func stopWaiting(for url: String, _ waiter: UInt64) {
        guard let continuation = flights[url]?.waiters.removeValue(forKey: waiter) else { return }
        continuation.resume(throwing: CancellationError())
        if let flight = flights[url], flight.waiters.isEmpty {
            flights[url] = nil
            flight.task.cancel()
        }
    }

    /// Fetches, then answers whoever still waits. A failure, not a cancellation, is remembered.
    private func fly(_ url: String, _ id: UInt64) async {
        let result: Result<UserTokenKeys, any Error>
        do {
            result = .success(try await fetchOnce(url))
            failedUntil[url] = nil
        } catch {
            if !Task.isCancelled {
                let reason = (error as? FetchFailure)?.reason ?? "\(error)"
                logger.warning("the key set could not be fetched: \(reason)", metadata: ["jwks_url": "\(url)"])
                failedUntil[url] = now().addingTimeInterval(Self.failureMemory)
            }
            result = .failure(Self.unavailable)
        }
        guard let flight = flights[url], flight.id == id else { return }
        flights[url] = nil
        for continuation in flight.waiters.values { continuation.resume(with: result) }
    }

    private func fetchOnce(_ url: String) async throws -> UserTokenKeys {
        let fetchedAt = now()
        let (body, maxAge) = try await download(url)
        let jwks: JSONValue
        do {
            jwks = try JSONDecoder().decode(JSONValue.self, from: body)
        } catch {
            throw FetchFailure(reason: "its answer is not JSON")
        }
        let keys: UserTokenKeys
        do {
            keys = try await UserTokenKeys.make(jwks: jwks, secret: nil, strict: false)
        } catch {
            throw FetchFailure(reason: "its answer is not a key set (\(error))")
        }
        let lifetime = min(max(maxAge ?? Self.defaultLifetime, Self.refetchInterval), Self.maxLifetime)
        entries[url] = Entry(keys: keys, expiresAt: fetchedAt.addingTimeInterval(lifetime), fetchedAt: fetchedAt)
        return keys
    }

    /// The answer's body and max-age, all of it within `options.timeout`. The client is this
    /// fetch's own: shutting it down closes every connection the fetch opened.
    private func download(_ url: String) async throws -> (Data, TimeInterval?) {
        let client: HTTPClient
        do {
            client = try BoundedFetch.client(trusting: options.trustedCertificateAuthorities, timeout: options.timeout)
        } catch {
            throw FetchFailure(reason: "the trusted authorities file \(error.path) could not be read")
        }
        let timeout = BoundedFetch.timeAmount(options.timeout)
        let deadline = options.timeout
        do {
            guard let answer = try await withinDeadline(deadline, { try await Self.get(url, with: client, timeout: timeout) }) else {
                throw FetchFailure(reason: "it did not answer in full within \(deadline)")
            }
            try? await client.shutdown()
            return answer
        } catch {
            try? await client.shutdown()
            if Task.isCancelled { throw CancellationError() }
            throw error
        }
    }

    private static func get(_ url: String, with client: HTTPClient, timeout: TimeAmount) async throws -> (Data, TimeInterval?) {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Accept", value: "application/json")
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, timeout: timeout)
        } catch {
            throw FetchFailure(reason: "it could not be reached (\(error))")
        }
        guard response.status == .ok else { throw FetchFailure(reason: "it answered HTTP \(response.status.code)") }
        let body: ByteBuffer
        do {
            body = try await response.body.collect(upTo: maxBytes)
        } catch {
            throw FetchFailure(reason: "its answer is larger than \(maxBytes) bytes or broke off (\(error))")
        }
        return (Data(buffer: body), maxAge(response.headers["Cache-Control"].joined(separator: ",")))
    }

    /// `max-age` of a Cache-Control value; 0 for `no-store` or `no-cache` (the minimum applies).
    static func maxAge(_ cacheControl: String) -> TimeInterval? {
        var age: TimeInterval?
        for directive in cacheControl.split(separator: ",") {
            // Empty pieces kept: a directive of "=" alone must not leave nothing to name it.
            let parts = directive.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
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

    /// Why a fetch failed: for the log only.
    private struct FetchFailure: Error {
        let reason: String
    }

    static let unavailable = ServiceError(.serviceUnavailable,
        "The application's key set could not be fetched, so user tokens cannot be checked; try again shortly. The backplane's log says why.")
}
