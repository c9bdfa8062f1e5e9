import BackplaneWire
import CoreMetrics
import Foundation
import Prometheus
import Synchronization

/// What a backplane counts and measures, for `GET /metrics` (Prometheus text format).
///
/// The services record through the swift-metrics API; swift-prometheus keeps the values and
/// writes the exposition. Each `BackplaneServices` has its own registry rather than the
/// process-wide `MetricsSystem`, so servers in one process (tests) count apart. The names, and
/// what to alert on, are listed in docs/operations.md.
public final class BackplaneMetrics: Sendable {
    /// Nil for `none`: nothing is kept.
    public let registry: PrometheusCollectorRegistry?
    private let factory: any MetricsFactory

    let wakeUpsSent: CoreMetrics.Counter
    let channelsOpen: CoreMetrics.Meter
    let registrations: CoreMetrics.Counter
    let deviceLimitRefusals: CoreMetrics.Counter
    let nonces: CoreMetrics.Meter
    private let rateLimitedDevices: CoreMetrics.Counter
    private let rateLimitedAddresses: CoreMetrics.Counter
    private let rateLimitedRegistrations: CoreMetrics.Counter
    let readTransactions: CoreMetrics.Timer
    let writeTransactions: CoreMetrics.Timer
    private let commandTransitions: [CommandTransition: CoreMetrics.Counter]
    private let eventOutcomes: [EventOutcome: CoreMetrics.Counter]
    private let userTokenOutcomes: [UserTokenOutcome: CoreMetrics.Counter]
    private let pushOutcomes: [PushProvider: [PushOutcome: CoreMetrics.Counter]]
    private let pushDurations: [PushProvider: CoreMetrics.Timer]
    private let pushRetries: [PushProvider: CoreMetrics.Counter]
    private let pushTokensDropped: [PushProvider: CoreMetrics.Counter]
    private let pushCredentialsBroken: [PushProvider: CoreMetrics.Counter]
    private let requests = Mutex<[RequestKey: RequestInstruments]>([:])

    /// A command's change of state, as counted in `backplane_commands_total{transition}`.
    enum CommandTransition: String, CaseIterable {
        case enqueued, delivered, succeeded, failed, deferred, cancelled
    }

    /// What became of an uploaded event, as counted in `backplane_events_total{outcome}`.
    enum EventOutcome: String, CaseIterable {
        case accepted, duplicate, rejected
    }

    /// The user token of a registration, as counted in `backplane_registration_user_tokens_total{token}`:
    /// what to watch before requiring tokens (docs/operations.md).
    enum UserTokenOutcome: String, CaseIterable {
        case verified, absent, refused
    }

    /// What became of a push, as counted in `backplane_pushes_total{provider,outcome}`: once per
    /// push, at its end (retries are `backplane_push_retries_total`).
    enum PushOutcome: String, CaseIterable {
        /// The provider accepted it.
        case delivered
        /// The provider said the token is dead; the device's token was dropped.
        case tokenDropped = "token_dropped"
        /// The provider refused the application's credentials (now marked broken), or they were
        /// already marked broken and nothing was sent.
        case credentialsBroken = "credentials_broken"
        /// Refused for another reason, or still failing after the last retry.
        case failed
    }

    /// Metrics kept in a registry of their own, for `/metrics`.
    public convenience init() {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        // Most requests and transactions take well under 5 ms, the library's smallest bucket.
        factory.defaultDurationHistogramBuckets = [
            .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
            .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
            .milliseconds(2500), .seconds(5), .seconds(10),
        ]
        self.init(registry: registry, factory: factory)
    }

    /// Counts nothing: for services built without a server (tests, one-shot commands).
    public static let none = BackplaneMetrics(registry: nil, factory: NOOPMetricsHandler.instance)

    private init(registry: PrometheusCollectorRegistry?, factory: any MetricsFactory) {
        self.registry = registry
        self.factory = factory
        wakeUpsSent = CoreMetrics.Counter(label: "backplane_wake_ups_sent_total", factory: factory)
        channelsOpen = CoreMetrics.Meter(label: "backplane_device_channels_open", factory: factory)
        registrations = CoreMetrics.Counter(label: "backplane_registrations_total", factory: factory)
        deviceLimitRefusals = CoreMetrics.Counter(label: "backplane_device_limit_refusals_total", factory: factory)
        nonces = CoreMetrics.Meter(label: "backplane_nonces", factory: factory)
        rateLimitedDevices = CoreMetrics.Counter(label: "backplane_rate_limited_total", dimensions: [("scope", "device")], factory: factory)
        rateLimitedAddresses = CoreMetrics.Counter(label: "backplane_rate_limited_total", dimensions: [("scope", "address")], factory: factory)
        rateLimitedRegistrations = CoreMetrics.Counter(
            label: "backplane_rate_limited_total", dimensions: [("scope", "registration")], factory: factory)
        readTransactions = CoreMetrics.Timer(label: "backplane_db_transaction_duration_seconds", dimensions: [("kind", "read")], factory: factory)
        writeTransactions = CoreMetrics.Timer(label: "backplane_db_transaction_duration_seconds", dimensions: [("kind", "write")], factory: factory)
        commandTransitions = Dictionary(uniqueKeysWithValues: CommandTransition.allCases.map {
            ($0, CoreMetrics.Counter(label: "backplane_commands_total", dimensions: [("transition", $0.rawValue)], factory: factory))
        })
        eventOutcomes = Dictionary(uniqueKeysWithValues: EventOutcome.allCases.map {
            ($0, CoreMetrics.Counter(label: "backplane_events_total", dimensions: [("outcome", $0.rawValue)], factory: factory))
        })
        userTokenOutcomes = Dictionary(uniqueKeysWithValues: UserTokenOutcome.allCases.map {
            ($0, CoreMetrics.Counter(label: "backplane_registration_user_tokens_total", dimensions: [("token", $0.rawValue)], factory: factory))
        })
        func perProvider<T>(_ make: (PushProvider) -> T) -> [PushProvider: T] {
            Dictionary(uniqueKeysWithValues: PushProvider.allCases.map { ($0, make($0)) })
        }
        pushOutcomes = perProvider { provider in
            Dictionary(uniqueKeysWithValues: PushOutcome.allCases.map {
                ($0, CoreMetrics.Counter(
                    label: "backplane_pushes_total", dimensions: [("provider", provider.rawValue), ("outcome", $0.rawValue)], factory: factory))
            })
        }
        pushDurations = perProvider {
            CoreMetrics.Timer(label: "backplane_push_duration_seconds", dimensions: [("provider", $0.rawValue)], factory: factory)
        }
        pushRetries = perProvider {
            CoreMetrics.Counter(label: "backplane_push_retries_total", dimensions: [("provider", $0.rawValue)], factory: factory)
        }
        pushTokensDropped = perProvider {
            CoreMetrics.Counter(label: "backplane_push_tokens_dropped_total", dimensions: [("provider", $0.rawValue)], factory: factory)
        }
        pushCredentialsBroken = perProvider {
            CoreMetrics.Counter(label: "backplane_push_credentials_broken_total", dimensions: [("provider", $0.rawValue)], factory: factory)
        }
        CoreMetrics.Meter(label: "backplane_build_info", dimensions: [("version", BackplaneBuild.version)], factory: factory).set(1)
    }

    func count(_ transition: CommandTransition, _ amount: Int = 1) {
        if amount > 0 { commandTransitions[transition]?.increment(by: amount) }
    }

    /// A request answered 429; `scope` is "device", "address" or "registration".
    func rateLimited(scope: String) {
        switch scope {
        case "device": rateLimitedDevices.increment()
        case "registration": rateLimitedRegistrations.increment()
        default: rateLimitedAddresses.increment()
        }
    }

    func count(_ outcome: UserTokenOutcome) {
        userTokenOutcomes[outcome]?.increment()
    }

    func count(_ outcome: PushOutcome, provider: PushProvider) {
        pushOutcomes[provider]?[outcome]?.increment()
        if outcome == .tokenDropped { pushTokensDropped[provider]?.increment() }
    }

    /// One request to a provider, from sending it to its answer: `backplane_push_duration_seconds{provider}`.
    func pushRequest(_ provider: PushProvider, took duration: Duration) {
        pushDurations[provider]?.recordNanoseconds(duration.nanoseconds)
    }

    func pushRetried(_ provider: PushProvider) {
        pushRetries[provider]?.increment()
    }

    /// An application's credentials were just marked broken.
    func pushCredentialsMarkedBroken(_ provider: PushProvider) {
        pushCredentialsBroken[provider]?.increment()
    }

    func count(_ outcome: EventOutcome, _ amount: Int = 1) {
        if amount > 0 { eventOutcomes[outcome]?.increment(by: amount) }
    }

    /// One answered request: `backplane_http_requests_total{route,method,status_class}` and
    /// `backplane_http_request_duration_seconds{route,method}`. `route` is the route's pattern
    /// (never the path a client sent, which would make a series per device).
    func request(route: String, method: String, status: Int, duration: Duration) {
        let statusClass = "\(min(max(status / 100, 1), 5))xx"
        let key = RequestKey(route: route, method: method, statusClass: statusClass)
        let instruments = requests.withLock { cache in
            if let found = cache[key] { return found }
            let made = RequestInstruments(
                count: CoreMetrics.Counter(
                    label: "backplane_http_requests_total",
                    dimensions: [("route", route), ("method", method), ("status_class", statusClass)], factory: factory),
                duration: CoreMetrics.Timer(
                    label: "backplane_http_request_duration_seconds", dimensions: [("route", route), ("method", method)], factory: factory))
            cache[key] = made
            return made
        }
        instruments.count.increment()
        instruments.duration.recordNanoseconds(duration.nanoseconds)
    }

    private struct RequestKey: Hashable {
        let route: String
        let method: String
        let statusClass: String
    }

    private struct RequestInstruments: @unchecked Sendable {
        let count: CoreMetrics.Counter
        let duration: CoreMetrics.Timer
    }
}

/// Where a store reports how long its transactions take. A store measures nothing until the
/// services built on it attach their metrics.
public final class TransactionTimings: Sendable {
    private let timers = Mutex<(read: CoreMetrics.Timer, write: CoreMetrics.Timer)?>(nil)

    public init() {}

    func attach(_ metrics: BackplaneMetrics) {
        timers.withLock { $0 = (metrics.readTransactions, metrics.writeTransactions) }
    }

    enum Kind { case read, write }

    /// Runs `body`, recording its duration, from the call to the answer: waits for a connection
    /// or for a shared commit included, as a request sees it.
    func measure<T>(_ kind: Kind, _ body: () async throws -> T) async rethrows -> T {
        guard let timers = timers.withLock({ $0 }) else { return try await body() }
        let start = ContinuousClock.now
        defer { (kind == .read ? timers.read : timers.write).recordNanoseconds((ContinuousClock.now - start).nanoseconds) }
        return try await body()
    }

    /// The same for a transaction run on the caller's thread.
    func measure<T>(_ kind: Kind, _ body: () throws -> T) rethrows -> T {
        guard let timers = timers.withLock({ $0 }) else { return try body() }
        let start = ContinuousClock.now
        defer { (kind == .read ? timers.read : timers.write).recordNanoseconds((ContinuousClock.now - start).nanoseconds) }
        return try body()
    }
}

extension Duration {
    /// Whole nanoseconds, as swift-metrics' timers take them.
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
