import Foundation
import Hummingbird
import NIOCore
import Synchronization

/// How many requests one device, or one client address, may make: a token bucket each, refilled
/// at `rate` per second up to `burst`. Past it a request is answered 429 with `Retry-After`, so
/// one misbehaving app (a sync loop gone wrong) cannot starve the others. Per node: with several
/// nodes behind a balancer each counts its own share.
public struct RateLimits: Sendable, Equatable {
    /// Requests per second per authenticated device; 0 turns the limit off.
    public var deviceRate: Double
    public var deviceBurst: Double
    /// Requests per second per client address (every route but the health checks and metrics);
    /// 0 turns it off. Off by default: behind a proxy every request has the proxy's address until
    /// `addressFromForwardedFor` is set; when on, keep it generous, since a carrier's NAT puts many
    /// devices behind one address.
    public var addressRate: Double
    public var addressBurst: Double
    /// Take the client address from the last entry of `X-Forwarded-For` (the one the proxy in
    /// front appended) rather than the connection's peer. Only behind a proxy that sets it.
    public var addressFromForwardedFor: Bool
    /// Registrations per second from one client address; 0 turns it off. On by default: anyone
    /// holding the app key (shipped in every copy of the app) can register, and each
    /// registration writes a row. Generous enough for a carrier's NAT.
    public var registrationAddressRate: Double
    public var registrationAddressBurst: Double
    /// Registrations per second for one user of an application; 0 turns it off. A person adds
    /// a device now and then; a script adds hundreds a second.
    public var registrationUserRate: Double
    public var registrationUserBurst: Double

    public init(
        deviceRate: Double = 20, deviceBurst: Double = 200, addressRate: Double = 0, addressBurst: Double = 5000,
        addressFromForwardedFor: Bool = false, registrationAddressRate: Double = 1, registrationAddressBurst: Double = 60,
        registrationUserRate: Double = 0.1, registrationUserBurst: Double = 30
    ) {
        self.deviceRate = deviceRate
        self.deviceBurst = deviceBurst
        self.addressRate = addressRate
        self.addressBurst = addressBurst
        self.addressFromForwardedFor = addressFromForwardedFor
        self.registrationAddressRate = registrationAddressRate
        self.registrationAddressBurst = registrationAddressBurst
        self.registrationUserRate = registrationUserRate
        self.registrationUserBurst = registrationUserBurst
    }

    /// No limits: for tests that make requests as fast as they can.
    public static let off = RateLimits(
        deviceRate: 0, deviceBurst: 0, addressRate: 0, addressBurst: 0, registrationAddressRate: 0, registrationAddressBurst: 0,
        registrationUserRate: 0, registrationUserBurst: 0)
}

/// Token buckets by key. Memory stays bounded: buckets that have refilled are forgotten when the
/// table grows, since a full bucket and no bucket answer alike.
final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    private let rate: Double
    private let burst: Double
    private let buckets = Mutex<[String: Bucket]>([:])
    private let maxBuckets: Int

    init(rate: Double, burst: Double, maxBuckets: Int = 100_000) {
        self.rate = rate
        self.burst = max(burst, 1)
        self.maxBuckets = maxBuckets
    }

    var isOn: Bool { rate > 0 }

    /// Nil when the request may go ahead (a token is taken), else how long until one is there.
    func take(_ key: String, now: ContinuousClock.Instant = .now) -> Duration? {
        guard isOn else { return nil }
        return buckets.withLock { buckets in
            var bucket = buckets[key] ?? Bucket(tokens: burst, updated: now)
            let elapsed = Double((now - bucket.updated).nanoseconds) / 1e9
            bucket.tokens = min(burst, bucket.tokens + max(0, elapsed) * rate)
            bucket.updated = now
            guard bucket.tokens >= 1 else {
                buckets[key] = bucket
                // Clamped before the conversion: a tiny rate must not overflow Int64.
                return .nanoseconds(Int64(min((1 - bucket.tokens) / rate, Self.longestWait) * 1e9))
            }
            bucket.tokens -= 1
            if buckets.count >= maxBuckets, buckets[key] == nil { forgetRefilled(&buckets, now: now) }
            buckets[key] = bucket
            return nil
        }
    }

    /// A day: the longest `Retry-After`, and the longest a bucket is kept refilling.
    static let longestWait: Double = 86_400

    private func forgetRefilled(_ buckets: inout [String: Bucket], now: ContinuousClock.Instant) {
        let refill = Duration.nanoseconds(Int64(min(burst / rate, Self.longestWait) * 1e9))
        buckets = buckets.filter { now - $0.value.updated < refill }
        // Still mostly active keys (many addresses at once): keep the freshest half, so that the
        // next scan is thousands of inserts away rather than the next one.
        if buckets.count >= maxBuckets * 3 / 4 {
            let kept = buckets.sorted { $0.value.updated > $1.value.updated }.prefix(maxBuckets / 2)
            buckets = Dictionary(uniqueKeysWithValues: kept.map { ($0.key, $0.value) })
        }
    }
}

/// The per-address limit, before anything else is done for a request.
struct AddressRateLimitMiddleware: RouterMiddleware {
    typealias Context = BackplaneRequestContext
    let limiter: RateLimiter
    let fromForwardedFor: Bool
    let metrics: BackplaneMetrics

    /// Health checks and scrapes are never limited: a balancer or Prometheus must see the truth.
    static let exempt: Set<String> = ["/healthz", "/readyz", "/metrics"]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard limiter.isOn, !Self.exempt.contains(request.uri.path), let address = clientAddress(request, context) else {
            return try await next(request, context)
        }
        if let wait = limiter.take(address) {
            metrics.rateLimited(scope: "address")
            throw BackplaneError.rateLimited("address", retryAfter: wait)
        }
        return try await next(request, context)
    }

    private func clientAddress(_ request: Request, _ context: Context) -> String? {
        Self.clientAddress(request, peer: context.channel?.remoteAddress?.ipAddress, fromForwardedFor: fromForwardedFor)
    }

    /// The client's address: the last `X-Forwarded-For` entry behind a trusted proxy, else the peer's.
    static func clientAddress(_ request: Request, peer: String?, fromForwardedFor: Bool) -> String? {
        if fromForwardedFor, let forwarded = request.headers[values: .init("X-Forwarded-For")!].last {
            let last = forwarded.split(separator: ",").last?.trimmingCharacters(in: .whitespaces)
            if let last, !last.isEmpty { return last }
        }
        return peer
    }
}

/// The registration limits: per client address and per user, checked once the body names the
/// user and before anything is written.
struct RegistrationLimiters: Sendable {
    let address: RateLimiter
    let user: RateLimiter
    let fromForwardedFor: Bool
    let metrics: BackplaneMetrics

    init(_ limits: RateLimits, metrics: BackplaneMetrics) {
        address = RateLimiter(rate: limits.registrationAddressRate, burst: limits.registrationAddressBurst)
        user = RateLimiter(rate: limits.registrationUserRate, burst: limits.registrationUserBurst)
        fromForwardedFor = limits.addressFromForwardedFor
        self.metrics = metrics
    }

    /// Throws 429 `rate_limited` (with `Retry-After`) when the client address's limit is reached.
    func checkAddress(_ request: Request, peer: String?) throws {
        if let address = AddressRateLimitMiddleware.clientAddress(request, peer: peer, fromForwardedFor: fromForwardedFor),
            let wait = self.address.take(address)
        {
            metrics.rateLimited(scope: "registration")
            throw BackplaneError.rateLimited("registration address", retryAfter: wait)
        }
    }

    /// Throws 429 `rate_limited` (with `Retry-After`) when the user's limit is reached. Charged
    /// only once the request may act for the user (its token verified, or none required), so
    /// that no one else can use up a user's registrations.
    func checkUser(applicationId: String, userId: String) throws {
        // The two ids joined by a byte neither may hold, so that no pair reads as another.
        if let wait = user.take("\(applicationId)\u{0}\(userId)") {
            metrics.rateLimited(scope: "registration")
            throw BackplaneError.rateLimited("registration user", retryAfter: wait)
        }
    }
}

/// The limiters of one router, made from `RateLimits`.
struct RequestLimiters: Sendable {
    let device: RateLimiter
    let address: RateLimiter
    let addressFromForwardedFor: Bool

    init(_ limits: RateLimits) {
        device = RateLimiter(rate: limits.deviceRate, burst: limits.deviceBurst)
        address = RateLimiter(rate: limits.addressRate, burst: limits.addressBurst)
        addressFromForwardedFor = limits.addressFromForwardedFor
    }
}
