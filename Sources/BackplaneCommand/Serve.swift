import ArgumentParser
import Backplane
import Foundation
import Logging
import NIOCore
import ServiceLifecycle

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the backplane over HTTP.",
        discussion: """
            Every option may also come from the environment: --some-option as BACKPLANE_SOME_OPTION. \
            A flag wins over the environment, the environment over the default.
            """)

    // Optional so that an unset flag can fall back to the environment; `validate()` fills each in.
    @Option(help: Environment.help("Address to listen on", option: "host", default: Defaults.host)) var host: String?
    @Option(help: Environment.help("Port to listen on, 0 picks a free one", option: "port", default: Defaults.port)) var port: Int?
    @OptionGroup var data: StoreOptions
    @OptionGroup var sealing: KeyEncryptionOptions
    @Option(help: Environment.help("trace, debug, info, notice, warning, error or critical", option: "log-level", default: Defaults.logLevel))
    var logLevel: String?
    @Option(help: Environment.help("text, or json for one JSON object per line (log shippers)", option: "log-format", default: Defaults.logFormat))
    var logFormat: String?
    @Option(help: ArgumentHelp(
        "When set, GET /metrics needs 'Authorization: Bearer <this>' (env BACKPLANE_METRICS_TOKEN).",
        discussion: "Prefer the environment: a flag shows in the process list."))
    var metricsToken: String?
    @Option(help: Environment.help("Seconds between server pings on idle device channels; 0 turns them off", option: "channel-ping-seconds", default: Defaults.channelPingSeconds))
    var channelPingSeconds: Int?
    @Option(help: Environment.help(
        "Days events are kept (by corrected time) before retention deletes them; 0 keeps them forever", option: "event-retention-days", default: Defaults.eventRetentionDays))
    var eventRetentionDays: Int?
    @Option(help: Environment.help(
        "Largest request head (request line and headers) in bytes; larger ones are answered 431", option: "max-header-bytes",
        default: Defaults.transport.maxHeaderBytes))
    var maxHeaderBytes: Int?
    @Option(help: Environment.help(
        "Seconds a connection may take to send a complete request head (also closes idle kept-alive connections)",
        option: "request-head-timeout-seconds", default: Defaults.requestHeadTimeoutSeconds))
    var requestHeadTimeoutSeconds: Int?
    @Option(help: Environment.help("Seconds a request body may take to arrive once its head has", option: "request-body-timeout-seconds", default: Defaults.requestBodyTimeoutSeconds))
    var requestBodyTimeoutSeconds: Int?
    @Option(help: Environment.help(
        "Open connections per process, WebSocket channels included; further ones wait in the listen backlog", option: "max-connections",
        default: Defaults.transport.maxConnections))
    var maxConnections: Int?

    @Option(help: Environment.help("Requests per second per device, past which it gets 429; 0 turns it off", option: "device-rate-limit", default: Defaults.rateLimits.deviceRate))
    var deviceRateLimit: Double?
    @Option(help: Environment.help("Requests a device may make at once before its rate applies", option: "device-rate-burst", default: Defaults.rateLimits.deviceBurst))
    var deviceRateBurst: Double?
    @Option(help: Environment.help(
        "Requests per second per client address (health checks and /metrics aside); 0 turns it off", option: "address-rate-limit", default: Defaults.rateLimits.addressRate))
    var addressRateLimit: Double?
    @Option(help: Environment.help("Requests an address may make at once before its rate applies", option: "address-rate-burst", default: Defaults.rateLimits.addressBurst))
    var addressRateBurst: Double?
    @Option(help: Environment.help(
        "true: the client address is the last X-Forwarded-For entry (only behind a proxy that sets it)", option: "trust-forwarded-for",
        default: Defaults.rateLimits.addressFromForwardedFor))
    var trustForwardedFor: Bool?
    @Option(help: Environment.help(
        "Registrations per second per client address; 0 turns it off", option: "registration-rate-limit",
        default: Defaults.rateLimits.registrationAddressRate))
    var registrationRateLimit: Double?
    @Option(help: Environment.help(
        "Registrations an address may make at once before its rate applies", option: "registration-rate-burst",
        default: Defaults.rateLimits.registrationAddressBurst))
    var registrationRateBurst: Double?
    @Option(help: Environment.help(
        "Registrations per second per user of an application; 0 turns it off", option: "user-registration-rate-limit",
        default: Defaults.rateLimits.registrationUserRate))
    var userRegistrationRateLimit: Double?
    @Option(help: Environment.help(
        "Registrations a user may make at once before its rate applies", option: "user-registration-rate-burst",
        default: Defaults.rateLimits.registrationUserBurst))
    var userRegistrationRateBurst: Double?
    @Flag(help: "Let applications name a URL of their user-token keys (jwksUrl), which this server then fetches over https (env BACKPLANE_ALLOW_JWKS_URL=true).")
    var allowJwksUrl = false
    @Option(help: Environment.help("A PEM file of certificate authorities trusted for jwksUrl besides the system's", option: "jwks-ca-file"))
    var jwksCaFile: String?
    @Option(help: Environment.help(
        "Seconds a key-set fetch (jwksUrl) may take in all: connection, TLS, head and body", option: "jwks-timeout-seconds",
        default: Defaults.jwksTimeoutSeconds))
    var jwksTimeoutSeconds: Int?
    @Option(help: Environment.help(
        "APNs base URL, for both environments (default: api.push.apple.com, or api.sandbox.push.apple.com as each application's credentials say)",
        option: "apns-url"))
    var apnsUrl: String?
    @Option(help: Environment.help("FCM HTTP v1 base URL", option: "fcm-url", default: PushOptions.googleFCMURL.absoluteString))
    var fcmUrl: String?
    @Option(help: Environment.help("Google's OAuth 2.0 token URL, where FCM service accounts are exchanged for access tokens", option: "google-token-url", default: PushOptions.googleTokenURL.absoluteString))
    var googleTokenUrl: String?
    @Option(help: Environment.help("A PEM file of certificate authorities trusted for the push providers besides the system's", option: "push-ca-file"))
    var pushCaFile: String?
    @Flag(help: "Let applications name license servers (Widevine, PlayReady, FairPlay), which this server then posts to over https (env BACKPLANE_ALLOW_LICENSE_SERVERS=true).")
    var allowLicenseServers = false
    @Option(help: Environment.help(
        "A PEM file of certificate authorities trusted for the applications' license servers besides the system's",
        option: "license-server-ca-file"))
    var licenseServerCaFile: String?
    @Option(help: Environment.help(
        "Seconds a forward to a license server may take in all: connection, TLS, head and body", option: "license-server-timeout-seconds",
        default: Defaults.licenseServerTimeoutSeconds))
    var licenseServerTimeoutSeconds: Int?

    /// Runs before anything touches the data directory: a bad option creates nothing. Fills every
    /// option from its flag, its environment variable or its default, then checks its range.
    mutating func validate() throws {
        host = try Environment.resolve(host, option: "host", default: Defaults.host)
        port = try Environment.resolve(port, option: "port", default: Defaults.port)
        logLevel = try Environment.resolve(logLevel, option: "log-level", default: Defaults.logLevel)
        logFormat = try Environment.resolve(logFormat, option: "log-format", default: Defaults.logFormat)
        metricsToken = Environment.resolve(metricsToken, option: "metrics-token")
        channelPingSeconds = try Environment.resolve(channelPingSeconds, option: "channel-ping-seconds", default: Defaults.channelPingSeconds)
        eventRetentionDays = try Environment.resolve(eventRetentionDays, option: "event-retention-days", default: Defaults.eventRetentionDays)
        maxHeaderBytes = try Environment.resolve(maxHeaderBytes, option: "max-header-bytes", default: Defaults.transport.maxHeaderBytes)
        requestHeadTimeoutSeconds = try Environment.resolve(requestHeadTimeoutSeconds, option: "request-head-timeout-seconds", default: Defaults.requestHeadTimeoutSeconds)
        requestBodyTimeoutSeconds = try Environment.resolve(requestBodyTimeoutSeconds, option: "request-body-timeout-seconds", default: Defaults.requestBodyTimeoutSeconds)
        maxConnections = try Environment.resolve(maxConnections, option: "max-connections", default: Defaults.transport.maxConnections)
        deviceRateLimit = try Environment.resolve(deviceRateLimit, option: "device-rate-limit", default: Defaults.rateLimits.deviceRate)
        deviceRateBurst = try Environment.resolve(deviceRateBurst, option: "device-rate-burst", default: Defaults.rateLimits.deviceBurst)
        addressRateLimit = try Environment.resolve(addressRateLimit, option: "address-rate-limit", default: Defaults.rateLimits.addressRate)
        addressRateBurst = try Environment.resolve(addressRateBurst, option: "address-rate-burst", default: Defaults.rateLimits.addressBurst)
        trustForwardedFor = try Environment.resolve(trustForwardedFor, option: "trust-forwarded-for", default: Defaults.rateLimits.addressFromForwardedFor)
        registrationRateLimit = try Environment.resolve(
            registrationRateLimit, option: "registration-rate-limit", default: Defaults.rateLimits.registrationAddressRate)
        registrationRateBurst = try Environment.resolve(
            registrationRateBurst, option: "registration-rate-burst", default: Defaults.rateLimits.registrationAddressBurst)
        userRegistrationRateLimit = try Environment.resolve(
            userRegistrationRateLimit, option: "user-registration-rate-limit", default: Defaults.rateLimits.registrationUserRate)
        userRegistrationRateBurst = try Environment.resolve(
            userRegistrationRateBurst, option: "user-registration-rate-burst", default: Defaults.rateLimits.registrationUserBurst)

        if !allowJwksUrl { allowJwksUrl = try Environment.resolve(nil, option: "allow-jwks-url", default: false) }
        jwksCaFile = Environment.resolve(jwksCaFile, option: "jwks-ca-file")
        jwksTimeoutSeconds = try Environment.resolve(jwksTimeoutSeconds, option: "jwks-timeout-seconds", default: Defaults.jwksTimeoutSeconds)
        guard (1...60).contains(jwksTimeoutSeconds!) else { throw ValidationError("--jwks-timeout-seconds must be 1 to 60.") }
        if let jwksCaFile, !FileManager.default.isReadableFile(atPath: jwksCaFile) {
            throw ValidationError("--jwks-ca-file: \(jwksCaFile) cannot be read.")
        }
        apnsUrl = Environment.resolve(apnsUrl, option: "apns-url")
        fcmUrl = Environment.resolve(fcmUrl, option: "fcm-url") ?? PushOptions.googleFCMURL.absoluteString
        googleTokenUrl = Environment.resolve(googleTokenUrl, option: "google-token-url") ?? PushOptions.googleTokenURL.absoluteString
        for (value, option) in [(apnsUrl, "apns-url"), (fcmUrl, "fcm-url"), (googleTokenUrl, "google-token-url")] {
            guard let value else { continue }
            guard let url = URL(string: value), url.scheme == "https", url.host?.isEmpty == false else {
                throw ValidationError("--\(option) must be an https URL.")
            }
        }
        pushCaFile = Environment.resolve(pushCaFile, option: "push-ca-file")
        if let pushCaFile, !FileManager.default.isReadableFile(atPath: pushCaFile) {
            throw ValidationError("--push-ca-file: \(pushCaFile) cannot be read.")
        }
        if !allowLicenseServers { allowLicenseServers = try Environment.resolve(nil, option: "allow-license-servers", default: false) }
        licenseServerCaFile = Environment.resolve(licenseServerCaFile, option: "license-server-ca-file")
        if let licenseServerCaFile, !FileManager.default.isReadableFile(atPath: licenseServerCaFile) {
            throw ValidationError("--license-server-ca-file: \(licenseServerCaFile) cannot be read.")
        }
        licenseServerTimeoutSeconds = try Environment.resolve(
            licenseServerTimeoutSeconds, option: "license-server-timeout-seconds", default: Defaults.licenseServerTimeoutSeconds)
        guard (1...60).contains(licenseServerTimeoutSeconds!) else { throw ValidationError("--license-server-timeout-seconds must be 1 to 60.") }
        guard Logger.Level(rawValue: logLevel!) != nil else { throw ValidationError("--log-level: unknown level '\(logLevel!)'.") }
        guard ["text", "json"].contains(logFormat!) else { throw ValidationError("--log-format must be text or json.") }
        if let metricsToken, metricsToken.count < 16 || metricsToken.count > 256 {
            throw ValidationError("--metrics-token must be 16 to 256 characters.")
        }
        guard (0...65_535).contains(port!) else { throw ValidationError("--port must be 0 to 65535.") }
        // Ranges keep every product below (days × 86400, seconds → Duration) far from overflow.
        guard (0...86_400).contains(channelPingSeconds!) else { throw ValidationError("--channel-ping-seconds must be 0 to 86400.") }
        guard (0...36_500).contains(eventRetentionDays!) else { throw ValidationError("--event-retention-days must be 0 to 36500.") }
        guard (1024...1 << 20).contains(maxHeaderBytes!) else { throw ValidationError("--max-header-bytes must be 1024 to 1048576.") }
        guard (1...3600).contains(requestHeadTimeoutSeconds!) else { throw ValidationError("--request-head-timeout-seconds must be 1 to 3600.") }
        guard (1...3600).contains(requestBodyTimeoutSeconds!) else { throw ValidationError("--request-body-timeout-seconds must be 1 to 3600.") }
        guard (1...1_000_000).contains(maxConnections!) else { throw ValidationError("--max-connections must be 1 to 1000000.") }
        for (value, name) in [
            (deviceRateLimit!, "device-rate-limit"), (addressRateLimit!, "address-rate-limit"),
            (registrationRateLimit!, "registration-rate-limit"), (userRegistrationRateLimit!, "user-registration-rate-limit"),
        ] {
            guard value.isFinite, value == 0 || (0.001...1_000_000).contains(value) else {
                throw ValidationError("--\(name) must be 0 (off) or 0.001 to 1000000.")
            }
        }
        for (value, name) in [
            (deviceRateBurst!, "device-rate-burst"), (addressRateBurst!, "address-rate-burst"),
            (registrationRateBurst!, "registration-rate-burst"), (userRegistrationRateBurst!, "user-registration-rate-burst"),
        ] {
            guard value.isFinite, (1...10_000_000).contains(value) else { throw ValidationError("--\(name) must be 1 to 10000000.") }
        }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel!) ?? .info  // checked in validate()
        let json = logFormat == "json"
        LoggingSystem.bootstrap { label in json ? JSONLogHandler(label: label) as any LogHandler : TextLogHandler(label: label) }
        // One server per data directory; `restore` waits for none. Held until the process ends.
        let lock = data.databaseURL == nil ? try DataDirectoryLock(directory: data.url) : nil
        defer { lock?.release() }
        let sealing = try sealing.key(for: data)
        if let made = sealing.made { Self.write(made) }
        do {
            try await data.withStore(logLevel: max(level, .notice)) { store in try await serve(store, sealing: sealing.key, level: level) }
        } catch let error as IOError where error.errnoCode == EADDRINUSE || error.errnoCode == EACCES || error.errnoCode == EADDRNOTAVAIL {
            throw ListenFailure(host: host!, port: port!, errno: error.errnoCode)
        }
    }

    private func serve(_ store: any BackplaneStore, sealing: KeyEncryptionKey?, level: Logger.Level) async throws {
        var logger = Logger(label: "backplane")
        logger.logLevel = level
        let services = BackplaneServices(
            store: store,
            userTokens: UserTokenOptions(
                allowJWKSURL: allowJwksUrl, jwksTrustedCertificateAuthorities: jwksCaFile.map(URL.init(fileURLWithPath:)),
                jwksFetchTimeout: .seconds(jwksTimeoutSeconds!),
                maxRegistrationsWaitingForKeySets: UserTokenOptions.waitingLimit(maxConnections: maxConnections!)),
            push: PushOptions(
                apnsURL: apnsUrl.flatMap(URL.init(string:)), fcmURL: URL(string: fcmUrl!) ?? PushOptions.googleFCMURL,
                googleTokenURL: URL(string: googleTokenUrl!) ?? PushOptions.googleTokenURL,
                trustedCertificateAuthorities: pushCaFile.map(URL.init(fileURLWithPath:))),
            licenseServers: LicenseServerForwarder.Options(
                allowed: allowLicenseServers, trustedCertificateAuthorities: licenseServerCaFile.map(URL.init(fileURLWithPath:)),
                timeout: .seconds(licenseServerTimeoutSeconds!), maxInFlight: UserTokenOptions.waitingLimit(maxConnections: maxConnections!)),
            keyEncryption: sealing)
        let configuration = BackplaneConfiguration(
            host: host!, port: port!, dataDirectory: data.url, logLevel: level,
            channelPingInterval: channelPingSeconds! > 0 ? .seconds(channelPingSeconds!) : nil,
            eventRetention: eventRetentionDays! > 0 ? .seconds(eventRetentionDays! * 86400) : nil,
            transport: TransportLimits(
                maxHeaderBytes: maxHeaderBytes!, requestHeadTimeout: .seconds(requestHeadTimeoutSeconds!),
                requestBodyTimeout: .seconds(requestBodyTimeoutSeconds!), maxConnections: maxConnections!),
            metricsToken: metricsToken,
            rateLimits: RateLimits(
                deviceRate: deviceRateLimit!, deviceBurst: deviceRateBurst!, addressRate: addressRateLimit!, addressBurst: addressRateBurst!,
                addressFromForwardedFor: trustForwardedFor!, registrationAddressRate: registrationRateLimit!,
                registrationAddressBurst: registrationRateBurst!, registrationUserRate: userRegistrationRateLimit!,
                registrationUserBurst: userRegistrationRateBurst!))
        let (bound, boundPort) = AsyncStream.makeStream(of: Int.self)
        let app = buildApplication(configuration, services: services, logger: logger) { port in
            boundPort.yield(port)
            boundPort.finish()
        }
        let host = host!, place = data.place
        let firstRun = AfterBind(ports: bound) { port in
            // Only once the port is ours: a start that cannot listen must not spend the
            // credentials that are shown once.
            if let credentials = try await Self.bootstrap(services, store: store) {
                Self.write(FirstRunBanner(credentials, place: place).text)
            }
            // Always printed, whatever the log level: scripts read the port from it (with --port 0).
            Self.write("backplane: listening on http://\(host):\(port)")
        }
        let group = ServiceGroup(configuration: .init(
            services: [.init(service: app), .init(service: firstRun, successTerminationBehavior: .ignore)],
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    /// Nodes starting together on an empty database: one creates the application, the others see it.
    private static func bootstrap(_ services: BackplaneServices, store: any BackplaneStore) async throws -> ApplicationService.FirstRunCredentials? {
        try await store.exclusively { try await services.applications.bootstrapIfEmpty() }
    }

    /// Straight to the file descriptor: stdout is block-buffered when piped to a log. A failed
    /// write (a closed pipe) must not end the server.
    private static func write(_ line: String) {
        try? FileHandle.standardOutput.write(contentsOf: Data((line + "\n").utf8))
    }
}

/// Runs `body` with the port once the server listens, as a service beside the server: if it
/// throws, the service group stops the server and `serve` exits with the error. If the server
/// never listens (a failed bind), the group cancels it and `body` never runs.
private struct AfterBind: Service {
    let ports: AsyncStream<Int>
    let body: @Sendable (Int) async throws -> Void

    func run() async throws {
        for await port in ports {
            try await body(port)
            return
        }
    }
}

/// Each option's default, written once for its help and its resolution; read from the library's
/// own defaults where it has them.
private enum Defaults {
    static let host = "127.0.0.1"
    static let port = 8080
    static let logLevel = "info"
    static let logFormat = "text"
    static let channelPingSeconds = 60
    static let eventRetentionDays = 365
    static let transport = TransportLimits()
    static let requestHeadTimeoutSeconds = Int(transport.requestHeadTimeout.components.seconds)
    static let jwksTimeoutSeconds = Int(UserTokenOptions().jwksFetchTimeout.components.seconds)
    static let licenseServerTimeoutSeconds = Int(LicenseServerForwarder.Options().timeout.components.seconds)
    static let requestBodyTimeoutSeconds = Int(transport.requestBodyTimeout.components.seconds)
    static let rateLimits = RateLimits()
}

/// The server could not take its address: one line naming it and what to do.
struct ListenFailure: Error, CustomStringConvertible {
    let host: String
    let port: Int
    let errno: Int32

    var description: String {
        let address = "\(host):\(port)"
        switch errno {
        case EADDRINUSE: return "cannot listen on \(address): the port is in use by another process. Stop it, or choose another port with --port."
        case EACCES: return "cannot listen on \(address): permission denied (ports below 1024 need privileges). Choose a port above 1023 with --port."
        default: return "cannot listen on \(address): no network interface has that address. Check --host."
        }
    }
}

/// The credentials of an application created on an empty database, shown once.
struct FirstRunBanner {
    let text: String

    init(_ credentials: ApplicationService.FirstRunCredentials, place: String) {
        text = """
            ===================== FIRST RUN: save these, they are shown only once =====================
            \(place) was empty, so an application was created for you.
              application id : \(credentials.application.id)
              app key id     : \(credentials.key.keyId)
              app key secret : \(credentials.key.secret)
              admin token    : \(credentials.adminToken)
            Devices sign requests with the app key; admin requests carry the token as a Bearer token.
            ============================================================================================
            """
    }
}
