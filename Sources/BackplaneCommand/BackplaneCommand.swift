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
        subcommands: [Serve.self, Migrate.self, AppCommand.self, TokenCommand.self],
        defaultSubcommand: Serve.self)
}

struct DataDirOption: ParsableArguments {
    @Option(name: .long, help: "Directory holding backplane.sqlite.")
    var dataDir: String = "./data"

    var url: URL { URL(fileURLWithPath: dataDir) }

    func openStore() throws -> SQLiteStore { try SQLiteStore(directory: url) }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serve the backplane over HTTP.")

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on (0 picks a free one).") var port = 8080
    @OptionGroup var data: DataDirOption
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
        let store = try data.openStore()
        let services = BackplaneServices(store: store)
        if let firstRun = try await services.applications.bootstrapIfEmpty() {
            // Written straight to the file descriptor: stdout is block-buffered when piped to a log.
            FileHandle.standardOutput.write(Data((firstRunBanner(firstRun, dataDir: data.dataDir) + "\n").utf8))
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

    private func firstRunBanner(_ credentials: ApplicationService.FirstRunCredentials, dataDir: String) -> String {
        """
        ===================== FIRST RUN: save these, they are shown only once =====================
        The data directory \(dataDir) was empty, so an application was created for you.
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
    @OptionGroup var data: DataDirOption

    func run() async throws {
        _ = try data.openStore()
        print("Database in \(data.dataDir) is up to date.")
    }
}

struct AppCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app", abstract: "Manage applications.", subcommands: [Create.self, List.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an application and print its first app key (shown once).")
        @Option(help: "A name for the application.") var name: String
        @OptionGroup var data: DataDirOption

        func run() async throws {
            let service = ApplicationService(store: try data.openStore())
            let (application, key) = try await service.createApplication(name: name)
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
        @OptionGroup var data: DataDirOption

        func run() async throws {
            for application in try await ApplicationService(store: try data.openStore()).applications() {
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
        @OptionGroup var data: DataDirOption

        func run() async throws {
            let service = ApplicationService(store: try data.openStore())
            print(try await service.createToken(applicationId: app, scope: scope, name: name))
        }
    }
}
