import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A throwaway PostgreSQL cluster for the tests: `initdb` and `pg_ctl` in a temporary directory,
/// on a free loopback port, started on first use and stopped (its files removed) when the test
/// process exits. Each `database()` is a new, empty database in it.
///
/// PostgreSQL refuses to run as root, so as root (CI) the cluster belongs to the `postgres` user
/// and its commands run through `runuser`. Where the binaries are missing the tests using it
/// skip with a warning, unless `BACKPLANE_REQUIRE_POSTGRES=1` (CI), where that is a failure.
public actor PostgresCluster {
    public static let shared = PostgresCluster()

    /// Why no cluster could be had: missing binaries (a skip) or a failed start (a failure).
    public enum Unavailable: Error, CustomStringConvertible {
        case notInstalled(String)
        case failed(String)

        public var description: String {
            switch self {
            case .notInstalled(let why), .failed(let why): why
            }
        }
    }

    private struct Running {
        var bin: URL
        var port: Int
        var data: String
        var options: String
        var log: String
        var asRoot: Bool
    }

    /// `shared` serves most tests; a test that stops its server makes a cluster of its own.
    public init() {}

    private var launching: Task<Result<Running, Unavailable>, Never>?
    private var databases = 0

    /// True unless the binaries are missing where they are not required; says so loudly once.
    public static let isAvailable: Bool = {
        if binDirectory() != nil { return true }
        if ProcessInfo.processInfo.environment["BACKPLANE_REQUIRE_POSTGRES"] == "1" { return true }  // and fail when used
        FileHandle.standardError.write(Data("""
            ***
            *** WARNING: PostgreSQL's initdb/pg_ctl were not found (looked in /usr/lib/postgresql/*/bin and PG_BIN):
            *** the PostgreSQL store tests are SKIPPED. Install Debian's `postgresql` to run them.
            ***

            """.utf8))
        return false
    }()

    /// A URL of a new empty database in the cluster, owned by a superuser without a password.
    public func database() async throws -> String {
        let running = try await start().get()
        databases += 1
        let name = "t\(getpid())_\(databases)"
        let created = try await ChildProcess.run(
            running.bin.appendingPathComponent("createdb"), ["-h", "127.0.0.1", "-p", "\(running.port)", "-U", "backplane", name])
        guard created.status == 0 else { throw Unavailable.failed("createdb failed: \(created.output)") }
        return "postgres://backplane@127.0.0.1:\(running.port)/\(name)?sslmode=disable"
    }

    /// How the server stops: `fast` cuts the connections and shuts down cleanly; `immediate`
    /// kills every server process, as a crash would, and the next start recovers from the WAL.
    public enum StopMode: String, Sendable {
        case fast, immediate
    }

    /// Stops the server, as an outage would.
    public func stopServer(_ mode: StopMode = .fast) async throws {
        let running = try await start().get()
        try await Self.run(running.bin, "pg_ctl", ["-D", running.data, "-m", mode.rawValue, "-w", "stop"], asRoot: running.asRoot)
    }

    /// `pg_ctl restart`: stops the server and starts it again on the same port.
    public func restartServer(_ mode: StopMode = .fast) async throws {
        let running = try await start().get()
        try await Self.run(
            running.bin, "pg_ctl", ["-D", running.data, "-m", mode.rawValue, "-o", running.options, "-l", running.log, "-w", "restart"],
            asRoot: running.asRoot)
    }

    /// Starts the stopped server again on the same port.
    public func startServer() async throws {
        let running = try await start().get()
        try await Self.run(
            running.bin, "pg_ctl", ["-D", running.data, "-o", running.options, "-l", running.log, "-w", "start"], asRoot: running.asRoot)
    }

    private func start() async throws -> Result<Running, Unavailable> {
        // One launch, however many tests ask while it runs (the actor is reentrant at each await).
        let launching = self.launching ?? Task { await self.launchOnce() }
        self.launching = launching
        return await launching.value
    }

    private func launchOnce() async -> Result<Running, Unavailable> {
        let result: Result<Running, Unavailable>
        do {
            result = .success(try await launch())
        } catch let error as Unavailable {
            result = .failure(error)
        } catch {
            result = .failure(.failed("\(error)"))
        }
        if case .success(let running) = result {
            FileHandle.standardError.write(Data("PostgresCluster: a throwaway cluster listens on 127.0.0.1:\(running.port)\n".utf8))
            Self.report("started on port \(running.port)")
        }
        return result
    }

    /// Adds a line to the report CI checks (`BACKPLANE_POSTGRES_REPORT`): the PostgreSQL tests
    /// ran rather than skipped.
    public static func report(_ line: String) {
        guard let path = ProcessInfo.processInfo.environment["BACKPLANE_POSTGRES_REPORT"] else { return }
        let data = Data("\(line)\n".utf8)
        if let handle = FileHandle(forWritingAtPath: path) {
            handle.seekToEndOfFile()
            handle.write(data)
            try? handle.close()
        } else {
            try? data.write(to: URL(fileURLWithPath: path))
        }
    }

    private func launch() async throws -> Running {
        guard let bin = Self.binDirectory() else {
            throw Unavailable.notInstalled("PostgreSQL's binaries are not installed (BACKPLANE_REQUIRE_POSTGRES=1 needs them)")
        }
        let asRoot = getuid() == 0
        await Self.removeAbandonedClusters(bin: bin, asRoot: asRoot)
        // The test process's id in the name tells a later run whether the cluster was abandoned.
        // Beside the test processes' directories, not in this one's: a later run stops an
        // abandoned cluster before its files go.
        let directory = temporaryBaseDirectory.appendingPathComponent("backplane-pg-\(getpid())-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        if asRoot {
            let owned = try await ChildProcess.run(URL(fileURLWithPath: "/bin/chown"), ["postgres:postgres", directory.path])
            guard owned.status == 0 else { throw Unavailable.failed("chown to the postgres user failed: \(owned.output)") }
        }
        let data = directory.appendingPathComponent("data").path
        try await Self.run(bin, "initdb", ["-D", data, "-U", "backplane", "--auth=trust", "-E", "UTF8", "--no-sync"], asRoot: asRoot)
        let port = try freePort()
        // fsync off: these databases live for one test run, and the suite's many commits would
        // otherwise wait on the disk. Durability of the store itself is PostgreSQL's setting.
        let options = "-p \(port) -k \(directory.path) -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=400"
        let log = directory.appendingPathComponent("log").path
        try await Self.run(bin, "pg_ctl", ["-D", data, "-o", options, "-l", log, "-w", "start"], asRoot: asRoot)
        Self.stopAtExit(bin: bin, data: data, directory: directory.path, asRoot: asRoot)
        return Running(bin: bin, port: port, data: data, options: options, log: log, asRoot: asRoot)
    }

    private static func run(_ bin: URL, _ tool: String, _ arguments: [String], asRoot: Bool) async throws {
        let path = bin.appendingPathComponent(tool).path
        let (executable, all) = asRoot
            ? (URL(fileURLWithPath: "/usr/sbin/runuser"), ["-u", "postgres", "--", path] + arguments)
            : (URL(fileURLWithPath: path), arguments)
        let result = try await ChildProcess.run(executable, all, timeout: .seconds(120))
        guard result.status == 0 else { throw Unavailable.failed("\(tool) failed (\(result.status)): \(result.output)") }
    }

    /// Stops and removes the clusters of test processes that were killed before their `atexit`.
    private static func removeAbandonedClusters(bin: URL, asRoot: Bool) async {
        let root = temporaryBaseDirectory
        for name in (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? [] where name.hasPrefix("backplane-pg-") {
            guard let pid = Int32(name.dropFirst("backplane-pg-".count).prefix { $0 != "-" }), kill(pid, 0) != 0, errno == ESRCH
            else { continue }
            let directory = root.appendingPathComponent(name)
            try? await run(bin, "pg_ctl", ["-D", directory.appendingPathComponent("data").path, "-m", "immediate", "stop"], asRoot: asRoot)
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// One of the installed server's tools (`psql`), for a test that asks PostgreSQL itself.
    public static func tool(_ name: String) -> URL? {
        binDirectory().map { $0.appendingPathComponent(name) }.flatMap { FileManager.default.isExecutableFile(atPath: $0.path) ? $0 : nil }
    }

    /// The newest installed server's binaries, or `PG_BIN`.
    static func binDirectory() -> URL? {
        if let given = ProcessInfo.processInfo.environment["PG_BIN"] { return URL(fileURLWithPath: given) }
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return versions.compactMap(Int.init).sorted().reversed()
            .map { URL(fileURLWithPath: "\(root)/\($0)/bin") }
            .first { FileManager.default.isExecutableFile(atPath: $0.appendingPathComponent("pg_ctl").path) }
    }

    /// What `atexit` runs, one command per cluster: a C function cannot capture.
    nonisolated(unsafe) private static var stopCommands: [String] = []
    private static let stopLock = NSLock()

    private static func stopAtExit(bin: URL, data: String, directory: String, asRoot: Bool) {
        let stop = "\(bin.path)/pg_ctl -D '\(data)' -m immediate stop >/dev/null 2>&1"
        let command = (asRoot ? "/usr/sbin/runuser -u postgres -- \(stop)" : stop) + "; rm -rf '\(directory)'"
        let first = stopLock.withLock {
            stopCommands.append(command)
            return stopCommands.count == 1
        }
        guard first else { return }
        atexit {
            for command in PostgresCluster.stopLock.withLock({ PostgresCluster.stopCommands }) { _ = system(command) }
        }
    }
}
