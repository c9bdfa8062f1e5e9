import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ServiceLifecycle
import BackplaneWire

/// How to run a backplane: where to listen and where the data lives.
public struct BackplaneConfiguration: Sendable {
    public var host: String
    public var port: Int
    public var dataDirectory: URL
    public var logLevel: Logger.Level
    /// How often expired nonces are forgotten.
    public var noncePruneInterval: Duration
    /// How often open commands past their expiry are marked expired (`CommandExpirySweep`).
    public var commandExpiryInterval: Duration
    /// How often devices' last-seen times are written (`LastSeenLog`): what a crash may lose.
    public var lastSeenWriteInterval: Duration
    /// How often the server pings an idle device channel, closing dead ones; nil: never (devices
    /// still ping, and a dead connection is noticed at the next wake-up written to it).
    public var channelPingInterval: Duration?
    /// Events older than this (by corrected time) are deleted; nil keeps them forever.
    public var eventRetention: Duration?
    /// How often the retention pass runs.
    public var eventRetentionInterval: Duration
    /// Header size, timeouts and connections of the HTTP transport.
    public var transport: TransportLimits
    /// When set, `GET /metrics` needs `Authorization: Bearer <metricsToken>`.
    public var metricsToken: String?
    /// Requests per device and per client address (429 past them).
    public var rateLimits: RateLimits

    public init(
        host: String = "127.0.0.1", port: Int = 8080, dataDirectory: URL = URL(fileURLWithPath: "data"),
        logLevel: Logger.Level = .info, noncePruneInterval: Duration = .seconds(60), commandExpiryInterval: Duration = .seconds(30),
        lastSeenWriteInterval: Duration = .seconds(5),
        channelPingInterval: Duration? = .seconds(60),
        eventRetention: Duration? = .seconds(365 * 86400), eventRetentionInterval: Duration = .seconds(3600),
        transport: TransportLimits = TransportLimits(), metricsToken: String? = nil, rateLimits: RateLimits = RateLimits()
    ) {
        self.host = host
        self.port = port
        self.dataDirectory = dataDirectory
        self.logLevel = logLevel
        self.noncePruneInterval = noncePruneInterval
        self.commandExpiryInterval = commandExpiryInterval
        self.lastSeenWriteInterval = lastSeenWriteInterval
        self.channelPingInterval = channelPingInterval
        self.eventRetention = eventRetention
        self.eventRetentionInterval = eventRetentionInterval
        self.transport = transport
        self.metricsToken = metricsToken
        self.rateLimits = rateLimits
    }
}

/// The services of one backplane, over one store.
public struct BackplaneServices: Sendable {
    public let store: any BackplaneStore
    /// The device channels open on this node.
    public let wakeUpHub: WakeUpHub
    /// Where the services announce wake-ups: the hub, or with a store that several nodes share
    /// (its `wakeUpRelay`) the publisher that also tells the other nodes, a service of the application.
    public let wakeUps: any WakeUpPublisher
    let wakeUpRelay: RelayedWakeUps?
    public let applications: ApplicationService
    public let devices: DeviceService
    public let commands: CommandService
    public let sync: SyncService
    public let entitlements: Entitlements
    public let grants: DownloadGrantService
    public let assetPolicies: AssetPolicyService
    /// Assets' content keys, sealed under `keyEncryption`.
    public let contentKeys: ContentKeyService
    /// The license door.
    public let licenses: LicenseService
    /// The license servers applications forward Widevine, PlayReady and FairPlay requests to.
    public let licenseServers: LicenseServerService
    public let feeds: FeedService
    public let subscriptions: SubscriptionService
    public let events: EventService
    /// User tokens: the applications' configurations and the check at registration.
    public let userIdentity: UserIdentityService
    /// The applications' APNs and FCM credentials, as admins set them.
    public let pushCredentials: PushCredentialsService
    /// Pushes devices that have commands and no open channel; a service of the application.
    public let pushes: PushDispatcher
    /// Last-seen times not yet written.
    public let lastSeen: LastSeenLog
    /// Last uses of app keys and tokens not yet written.
    public let credentialUse = CredentialUseLog()
    /// What `/metrics` reports.
    public let metrics: BackplaneMetrics
    /// Whether the database answers (`/readyz`), and its gauges.
    public let health: StoreHealth
    let now: @Sendable () -> Date

    public init(
        store: any BackplaneStore, wakeUpHub: WakeUpHub? = nil, metrics: BackplaneMetrics = BackplaneMetrics(),
        userTokens: UserTokenOptions = UserTokenOptions(), push: PushOptions = PushOptions(),
        commandSupport: CommandSupport = .current, licenseServers: LicenseServerForwarder.Options = LicenseServerForwarder.Options(),
        keyEncryption: KeyEncryptionKey? = nil, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store
        self.health = StoreHealth(store: store)
        self.metrics = metrics
        store.transactionTimings.attach(metrics)
        let wakeUpHub = wakeUpHub ?? WakeUpHub(metrics: metrics)
        self.wakeUpHub = wakeUpHub
        let relay = store.wakeUpRelay.map { RelayedWakeUps(relay: $0, hub: wakeUpHub, answerWindow: push.channelAnswerWindow) }
        let wakeUps: any WakeUpPublisher = relay ?? wakeUpHub
        self.wakeUpRelay = relay
        self.wakeUps = wakeUps
        self.applications = ApplicationService(store: store, wakeUps: wakeUps, credentialUse: credentialUse)
        self.lastSeen = LastSeenLog()
        self.devices = DeviceService(store: store, wakeUps: wakeUps, lastSeen: lastSeen, metrics: metrics, now: now)
        let pushes = PushDispatcher(
            store: store, presence: relay.map { $0 as any ChannelPresence } ?? wakeUpHub, wakeUps: wakeUps, options: push, metrics: metrics,
            now: now)
        self.pushes = pushes
        self.pushCredentials = PushCredentialsService(store: store, now: now, changed: { pushes.credentialsChanged(applicationId: $0) })
        self.commands = CommandService(
            store: store, wakeUps: wakeUps, pushes: pushes, metrics: metrics, support: commandSupport, now: now)
        self.entitlements = Entitlements(store: store, now: now)
        self.grants = DownloadGrantService(store: store, entitlements: entitlements, commands: commands, now: now)
        self.assetPolicies = AssetPolicyService(store: store, now: now)
        self.contentKeys = ContentKeyService(store: store, sealing: keyEncryption, now: now)
        self.licenseServers = LicenseServerService(store: store, allowed: licenseServers.allowed, now: now)
        self.licenses = LicenseService(
            store: store, contentKeys: contentKeys, licenseServers: self.licenseServers, entitlements: entitlements,
            forwarder: LicenseServerForwarder(options: licenseServers), now: now)
        self.sync = SyncService(store: store, devices: devices, commands: commands, lastSeen: lastSeen, licenses: licenses, now: now)
        self.feeds = FeedService(store: store, wakeUps: wakeUps, now: now)
        self.subscriptions = SubscriptionService(store: store, now: now)
        self.events = EventService(store: store, lastSeen: lastSeen, metrics: metrics, now: now)
        self.userIdentity = UserIdentityService(store: store, options: userTokens, metrics: metrics, now: now)
        self.now = now
    }
}

/// Every route of the backplane. Takes dependencies, not configuration, so tests can inject them.
/// How a request goes through them: docs/architecture.md.
/// `accessLog` gets a line per request (none when nil); `metricsToken`, when set, is required by
/// `GET /metrics`.
public func buildRouter(
    _ services: BackplaneServices, accessLog: Logger? = nil, metricsToken: String? = nil, rateLimits: RateLimits = .off
) -> Router<BackplaneRequestContext> {
    let router = Router(context: BackplaneRequestContext.self)
    let allowedMethods = AllowedMethods()
    let limiters = RequestLimiters(rateLimits)
    // Middleware first: Hummingbird applies to a route the middleware added before it, and the
    // first added is the outermost.
    router.add(middleware: AccessLogMiddleware(logger: accessLog, metrics: services.metrics))
    router.add(middleware: ErrorMiddleware(allowedMethods: allowedMethods))
    router.add(middleware: AddressRateLimitMiddleware(
        limiter: limiters.address, fromForwardedFor: limiters.addressFromForwardedFor, metrics: services.metrics))
    HealthController(health: services.health).addRoutes(to: router)
    MetricsController(services: services, token: metricsToken).addRoutes(to: router)
    // Who may call what is decided here, once: each group proves its caller, and its handlers
    // run in a context where that caller is not optional.
    let callers = CallerGroups(router: router, services: services, deviceLimiter: limiters.device)
    let devices = DevicesController(
        devices: services.devices, userIdentity: services.userIdentity, sync: services.sync,
        registrationLimits: RegistrationLimiters(rateLimits, metrics: services.metrics))
    devices.addRegistration(to: callers.signedByAppKey("v1/devices/register"))
    let signedByDevice = callers.signedByDevice("v1")
    devices.addRoutes(to: signedByDevice)
    devices.addSync(to: callers.signedByDeviceSpentByService("v1/sync"))
    SubscriptionsController(subscriptions: services.subscriptions).addRoutes(to: signedByDevice)
    EventsController(events: services.events).addRoutes(to: callers.signedByDeviceSpentByService("v1/events"))
    let admin = callers.bearer("v1/admin", scope: .admin)
    AdminController(
        devices: services.devices, applications: services.applications, commands: services.commands, userIdentity: services.userIdentity
    ).addRoutes(to: admin)
    PushCredentialsController(credentials: services.pushCredentials).addRoutes(to: admin)
    let grants = DownloadGrantsController(
        grants: services.grants, assetPolicies: services.assetPolicies, entitlements: services.entitlements, applications: services.applications)
    grants.addDeviceRoutes(to: signedByDevice)
    grants.addAdminRoutes(to: admin)
    grants.addPublicRoutes(to: router)
    ContentKeysController(contentKeys: services.contentKeys).addAdminRoutes(to: admin)
    LicenseServersController(licenseServers: services.licenseServers).addAdminRoutes(to: admin)
    let licenses = LicensesController(licenses: services.licenses)
    licenses.addDeviceRoutes(to: signedByDevice)
    licenses.addAdminRoutes(to: admin)
    CMSController(feeds: services.feeds).addRoutes(to: callers.bearer("v1/cms/feeds", scope: .cms))
    ReportsController(events: services.events).addRoutes(to: callers.bearer("v1/reports/events", scope: .reporting))
    ConsoleController(services: services).addRoutes(to: router)
    allowedMethods.learn(from: router)
    return router
}

/// The routes that may upgrade to a WebSocket: the device channels. Only requests with an
/// `Upgrade: websocket` header come here; one it refuses (bad credentials, another device's
/// channel) is answered with the refusal's status and error body by `ConnectionGuard`. A request
/// for the channel without the header goes to `buildRouter`'s routes.
///
/// Channel upgrades have limiters of their own (a device reconnecting in a loop is limited like
/// one syncing in a loop), apart from those of `buildRouter`.
public func buildWebSocketRouter(
    _ services: BackplaneServices, accessLog: Logger? = nil, rateLimits: RateLimits = .off
) -> Router<BackplaneRequestContext> {
    let router = Router(context: BackplaneRequestContext.self)
    let limiters = RequestLimiters(rateLimits)
    router.add(middleware: AccessLogMiddleware(logger: accessLog, metrics: services.metrics))
    router.add(middleware: UpgradeRefusalMiddleware())
    router.add(middleware: AddressRateLimitMiddleware(
        limiter: limiters.address, fromForwardedFor: limiters.addressFromForwardedFor, metrics: services.metrics))
    let callers = CallerGroups(router: router, services: services, deviceLimiter: limiters.device)
    ChannelController().addRoutes(to: callers.signedByDeviceInRootContext("v1/devices"))
    return router
}

/// The HTTP server and the background services, over the given store. `onServerRunning` gets the
/// port the server listens on (useful with port 0).
public func buildApplication(
    _ configuration: BackplaneConfiguration, services: BackplaneServices, logger: Logger? = nil,
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) -> some ApplicationProtocol {
    let logger = logger ?? {
        var logger = Logger(label: "backplane")
        logger.logLevel = configuration.logLevel
        return logger
    }()
    var accessLog = logger
    accessLog[metadataKey: "log"] = "access"
    var application = Application(
        router: buildRouter(services, accessLog: accessLog, metricsToken: configuration.metricsToken, rateLimits: configuration.rateLimits),
        server: .guardedHTTP1WithWakeUpChannels(
            webSocketRouter: buildWebSocketRouter(services, accessLog: accessLog, rateLimits: configuration.rateLimits), hub: services.wakeUpHub, limits: configuration.transport,
            pingInterval: configuration.channelPingInterval),
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.port), serverName: "backplane",
            availableConnectionsDelegate: MaximumAvailableConnections(configuration.transport.maxConnections)),
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? configuration.port) },
        logger: logger)
    application.addServices(NonceJanitor(store: services.store, interval: configuration.noncePruneInterval, logger: logger, now: services.now))
    application.addServices(CommandExpirySweep(store: services.store, interval: configuration.commandExpiryInterval, logger: logger, now: services.now))
    application.addServices(WakeUpChannelCloser(hub: services.wakeUpHub))
    if let relay = services.wakeUpRelay { application.addServices(relay) }
    application.addServices(services.pushes)
    application.addServices(LastSeenWriter(
        log: services.lastSeen, credentialUse: services.credentialUse, store: services.store, interval: configuration.lastSeenWriteInterval, logger: logger))
    if let retention = configuration.eventRetention {
        application.addServices(EventRetention(
            store: services.store, maxAge: retention, interval: configuration.eventRetentionInterval, logger: logger, now: services.now))
    }
    return application
}

/// Opens the SQLite store in the configured data directory and builds the application on it.
public func buildApplication(_ configuration: BackplaneConfiguration) throws -> some ApplicationProtocol {
    let store = try SQLiteStore(directory: configuration.dataDirectory)
    let keyEncryption = try KeyEncryptionKey.inDataDirectory(configuration.dataDirectory).key
    return buildApplication(configuration, services: BackplaneServices(store: store, keyEncryption: keyEncryption))
}
