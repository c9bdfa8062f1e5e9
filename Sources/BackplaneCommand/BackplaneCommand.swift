import ArgumentParser
import Backplane
import Foundation
import Logging
import BackplaneWire

@main
struct BackplaneCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backplane",
        abstract: "The Backplane sync server for offline video downloads.",
        subcommands: [Serve.self, Migrate.self, AppCommand.self, TokenCommand.self, CopyData.self],
        defaultSubcommand: Serve.self)
}

/// Where the data lives: SQLite in a data directory (the default), or a PostgreSQL database
/// that several nodes may share.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: "Directory holding backplane.sqlite, the embedded store used without --database-url.")
    var dataDir: String = "./data"
    @Option(
        name: .customLong("database-url"),
        help: ArgumentHelp(
            "Keep the data in PostgreSQL instead: postgres://user@host:port/database[?sslmode=disable|prefer|require|verify-full&pool_max=N].",
            discussion: "The password may be given in PGPASSWORD rather than in the URL."))
    var databaseURL: String?

    var url: URL { URL(fileURLWithPath: dataDir) }

    func validate() throws {
        if let databaseURL {
            do { _ = try PostgresURL(databaseURL) } catch { throw ValidationError("\(error)") }
        }
    }

    /// What the data is called in messages (a URL without its password).
    var place: String {
        if let databaseURL, let url = try? PostgresURL(databaseURL) { return "The database \(url)" }
        return "The data directory \(dataDir)"
    }

    /// Opens (and migrates) the store for `body`; a PostgreSQL store's connections close after it.
    /// `logLevel` is the PostgreSQL client's: one-shot commands keep it to errors.
    func withStore<T: Sendable>(logLevel: Logger.Level = .error, _ body: (any BackplaneStore) async throws -> T) async throws -> T {
        guard let databaseURL else { return try await body(try SQLiteStore(directory: url)) }
        var logger = Logger(label: "backplane.postgres")
        logger.logLevel = logLevel
        return try await PostgresStore.withStore(try PostgresURL(databaseURL).configuration, logger: logger) { try await body($0) }
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serve the backplane over HTTP.")

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on (0 picks a free one).") var port = 8080
    @OptionGroup var data: StoreOptions
    @Option(help: "trace, debug, info, notice, warning, error or critical.") var logLevel = "info"
    @Option(help: "Seconds between server pings on idle device channels; 0 turns them off.") var channelPingSeconds = 60
    @Option(help: "Days events are kept (by corrected time) before retention deletes them; 0 keeps them forever.")
    var eventRetentionDays = 365
    @Option(help: "Largest request head (request line and headers) in bytes; larger ones are answered 431.")
    var maxHeaderBytes = TransportLimits().maxHeaderBytes
    @Option(help: "Seconds a connection may take to send a complete request head (also closes idle kept-alive connections).")
    var requestHeadTimeoutSeconds = 30
    @Option(help: "Seconds a request body may take to arrive once its head has.")
    var requestBodyTimeoutSeconds = 60
    @Option(help: "Open connections per process, WebSocket channels included; further ones wait in the listen backlog.")
    var maxConnections = TransportLimits().maxConnections

    /// Runs before anything touches the data directory: a bad flag creates nothing.
    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("Unknown log level '\(logLevel)'.") }
        // Ranges keep every product below (days × 86400, seconds → Duration) far from overflow.
        guard (0...86_400).contains(channelPingSeconds) else { throw ValidationError("--channel-ping-seconds must be 0 to 86400.") }
        guard (0...36_500).contains(eventRetentionDays) else { throw ValidationError("--event-retention-days must be 0 to 36500.") }
        guard (1024...1 << 20).contains(maxHeaderBytes) else { throw ValidationError("--max-header-bytes must be 1024 to 1048576.") }
        guard (1...3600).contains(requestHeadTimeoutSeconds), (1...3600).contains(requestBodyTimeoutSeconds) else {
            throw ValidationError("--request-head-timeout-seconds and --request-body-timeout-seconds must be 1 to 3600.")
        }
        guard (1...1_000_000).contains(maxConnections) else { throw ValidationError("--max-connections must be 1 to 1000000.") }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info  // checked in validate()
        try await data.withStore(logLevel: max(level, .notice)) { store in try await serve(store, level: level) }
    }

    private func serve(_ store: any BackplaneStore, level: Logger.Level) async throws {
        let services = BackplaneServices(store: store)
        // Nodes starting together on an empty database: one creates the application, the others see it.
        let firstRun = if let shared = store as? PostgresStore {
            try await shared.exclusively { try await services.applications.bootstrapIfEmpty() }
        } else {
            try await services.applications.bootstrapIfEmpty()
        }
        if let firstRun {
            // Written straight to the file descriptor: stdout is block-buffered when piped to a log.
            FileHandle.standardOutput.write(Data((firstRunBanner(firstRun, place: data.place) + "\n").utf8))
        }
        let configuration = BackplaneConfiguration(
            host: host, port: port, dataDirectory: data.url, logLevel: level,
            channelPingInterval: channelPingSeconds > 0 ? .seconds(channelPingSeconds) : nil,
            eventRetention: eventRetentionDays > 0 ? .seconds(eventRetentionDays * 86400) : nil,
            transport: TransportLimits(
                maxHeaderBytes: maxHeaderBytes, requestHeadTimeout: .seconds(requestHeadTimeoutSeconds),
                requestBodyTimeout: .seconds(requestBodyTimeoutSeconds), maxConnections: maxConnections))
        let host = host
        let app = buildApplication(configuration, services: services) { port in
            // Always printed, whatever the log level: scripts read the port from it (with --port 0).
            FileHandle.standardOutput.write(Data("backplane: listening on http://\(host):\(port)\n".utf8))
        }
        try await app.runService()
    }

    private func firstRunBanner(_ credentials: ApplicationService.FirstRunCredentials, place: String) -> String {
        """
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

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Create or upgrade the database schema, then exit.")
    @OptionGroup var data: StoreOptions

    func run() async throws {
        try await data.withStore { _ in }
        print("\(data.place) is up to date.")
    }
}

struct AppCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app", abstract: "Manage applications.", subcommands: [Create.self, List.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an application and print its first app key (shown once).")
        @Option(help: "A name for the application.") var name: String
        @OptionGroup var data: StoreOptions

        func run() async throws {
            let (application, key) = try await data.withStore { store in try await ApplicationService(store: store).createApplication(name: name) }
            print("""
                application id : \(application.id)
                app key id     : \(key.keyId)
                app key secret : \(key.secret)
                (the secret is shown only now)
                """)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List applications.")
        @OptionGroup var data: StoreOptions

        func run() async throws {
            for application in try await data.withStore({ store in try await ApplicationService(store: store).applications() }) {
                print("\(application.id)\t\(application.name)")
            }
        }
    }
}

extension TokenScope: ExpressibleByArgument {}

struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token", abstract: "Manage bearer tokens.", subcommands: [Create.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a bearer token and print it (shown once).")
        @Option(help: "The application id.") var app: String
        @Option(help: "admin, cms or reporting.") var scope: TokenScope
        @Option(help: "What the token is for.") var name = "cli"
        @OptionGroup var data: StoreOptions

        func run() async throws {
            print(try await data.withStore { store in
                try await ApplicationService(store: store).createToken(applicationId: app, scope: scope, name: name)
            })
        }
    }
}

struct CopyData: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy-data",
        abstract: "Copy an embedded (SQLite) backplane into an empty PostgreSQL database.",
        discussion: """
            Stop the backplane that uses the data directory first. Everything is copied (applications, keys, tokens, \
            devices, commands, feeds and their change log, subscriptions, events, download grants), so devices keep \
            syncing from where they were. Refuses a database that already holds data; checks every table's count.
            """)

    @Option(help: "The data directory holding backplane.sqlite.") var fromDataDir: String
    @Option(help: "The PostgreSQL database to fill: postgres://user@host:port/database[?sslmode=…].") var toDatabaseUrl: String

    func validate() throws {
        do { _ = try PostgresURL(toDatabaseUrl) } catch { throw ValidationError("\(error)") }
        let file = URL(fileURLWithPath: fromDataDir).appendingPathComponent("backplane.sqlite").path
        guard FileManager.default.fileExists(atPath: file) else { throw ValidationError("No backplane.sqlite in \(fromDataDir).") }
    }

    func run() async throws {
        let source = try SQLiteStore(directory: URL(fileURLWithPath: fromDataDir))
        let target = try PostgresURL(toDatabaseUrl)
        var logger = Logger(label: "backplane.postgres")
        logger.logLevel = .error
        let counts = try await PostgresStore.withStore(target.configuration, logger: logger) { store in
            try await SQLiteToPostgres.copy(from: source, to: store)
        }
        for (table, rows) in counts { print("\(table.padding(toLength: 18, withPad: " ", startingAt: 0)) \(rows)") }
        print("Copied \(fromDataDir) into \(target). Serve with --database-url from now on.")
    }
}
