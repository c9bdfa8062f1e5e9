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
        version: BackplaneBuild.version,
        subcommands: [Serve.self, Migrate.self, AppCommand.self, TokenCommand.self, Backup.self, Restore.self, CopyData.self],
        defaultSubcommand: Serve.self)
}

/// Where the data lives: SQLite in a data directory (the default), or a PostgreSQL database
/// that several nodes may share.
struct StoreOptions: ParsableArguments {
    @Option(
        name: .customLong("data-dir"),
        help: Environment.help("Directory holding backplane.sqlite, the embedded store used without --database-url", option: "data-dir", default: "./data"))
    var dataDirFlag: String?
    @Option(
        name: .customLong("database-url"),
        help: ArgumentHelp(
            "Keep the data in PostgreSQL instead: postgres://user@host:port/database[?sslmode=disable|prefer|require|verify-full&pool_max=N] (env BACKPLANE_DATABASE_URL).",
            discussion: "The password may be given in PGPASSWORD rather than in the URL."))
    var databaseURLFlag: String?

    /// Flag, else `BACKPLANE_DATA_DIR`, else ./data.
    var dataDir: String { Environment.resolve(dataDirFlag, option: "data-dir") ?? "./data" }
    /// Flag, else `BACKPLANE_DATABASE_URL`; nil keeps the data in SQLite.
    var databaseURL: String? { Environment.resolve(databaseURLFlag, option: "database-url") }

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
        commandName: "app", abstract: "Manage applications.", subcommands: [Create.self, List.self, Keys.self, UserIdentityCommand.self, PushCommand.self, ContentKeysCommand.self])

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

extension AppCommand {
    struct Keys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List an application's app keys (never their secrets).",
            discussion: "Columns: key id, created, revoked, last used (as written by a running server, every few seconds).")
        @Option(help: "The application id.") var app: String
        @OptionGroup var data: StoreOptions

        func run() async throws {
            let keys = try await data.withStore { store in try await ApplicationService(store: store).appKeys(applicationId: app) }
            for key in keys {
                print([key.keyId, TokenCommand.List.time(key.createdAt), TokenCommand.List.time(key.revokedAt),
                       TokenCommand.List.time(key.lastUsedAt)].joined(separator: "\t"))
            }
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
