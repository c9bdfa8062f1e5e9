import Backplane
import ClientSDK
import Foundation
import Synchronization
import Hummingbird
import BackplaneWire
import Testing
import TestSupport

/// A real backplane in this process, listening on a real port, over a SQLite data directory.
final class InProcessBackplane: Sendable {
    let port: Int
    let services: BackplaneServices
    let applicationId: String
    let keyId: String
    let secret: String
    let directory: URL
    /// The backplane's clock, kept across restarts.
    let now: @Sendable () -> Date
    private let task: Task<Void, any Error>

    private init(
        port: Int, services: BackplaneServices, applicationId: String, keyId: String, secret: String, directory: URL,
        now: @escaping @Sendable () -> Date, task: Task<Void, any Error>
    ) {
        self.now = now
        self.port = port
        self.services = services
        self.applicationId = applicationId
        self.keyId = keyId
        self.secret = secret
        self.directory = directory
        self.task = task
    }

    /// A new data directory with one application, served on a free port.
    /// `now` is the backplane's clock (tests of rights move it with the device's).
    static func start(
        deviceLimit: Int? = nil, push: PushOptions = PushOptions(),
        licenseServers: LicenseServerForwarder.Options = LicenseServerForwarder.Options(), now: @escaping @Sendable () -> Date = { Date() }
    ) async throws -> InProcessBackplane {
        let directory = temporaryDirectory("backplane-sdk-server")
        let services = BackplaneServices(
            store: try SQLiteStore(directory: directory), push: push, licenseServers: licenseServers,
            keyEncryption: try KeyEncryptionKey.inDataDirectory(directory).key, now: now)
        let (application, key) = try await services.testApplication(name: "sdk tests", deviceLimit: deviceLimit)
        return try await serve(
            services: services, applicationId: application.id, keyId: key.keyId, secret: key.secret, directory: directory, now: now, port: 0)
    }

    /// The same data directory served again (after `stop()`), on `port`.
    func restart(port: Int? = nil) async throws -> InProcessBackplane {
        let reopened = BackplaneServices(
            store: try SQLiteStore(directory: directory), keyEncryption: try KeyEncryptionKey.inDataDirectory(directory).key, now: now)
        return try await Self.serve(
            services: reopened, applicationId: applicationId, keyId: keyId, secret: secret, directory: directory, now: now,
            port: port ?? self.port)
    }

    private static func serve(
        services: BackplaneServices, applicationId: String, keyId: String, secret: String, directory: URL,
        now: @escaping @Sendable () -> Date, port: Int
    ) async throws -> InProcessBackplane {
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        // `stop()` cancels the server to make it vanish the way a crashed one does; Hummingbird logs
        // the cancelled connections at error level, which is expected here, so only critical logs show.
        let app = buildApplication(
            BackplaneConfiguration(port: port, dataDirectory: directory, logLevel: .critical, rateLimits: .tests), services: services,
            onServerRunning: { continuation.yield($0) })
        let task = Task { try await app.runService(gracefulShutdownSignals: []) }
        var iterator = ports.makeAsyncIterator()
        guard let bound = await iterator.next() else { throw CancellationError() }
        return InProcessBackplane(
            port: bound, services: services, applicationId: applicationId, keyId: keyId, secret: secret, directory: directory, now: now,
            task: task)
    }

    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    func stop() async {
        task.cancel()
        _ = try? await task.value
    }

    /// An hour between interval syncs, so anything sooner comes from `syncNow`, the channel or a
    /// retry; the channel is off unless a test turns it on.
    func configuration(user: String, dataDirectory: URL, secret: String? = nil, channel: Bool = false) -> BackplaneClientConfiguration {
        BackplaneClientConfiguration(
            backplaneURL: url, appKeyId: keyId, appKeySecret: secret ?? self.secret, userId: user, dataDirectory: dataDirectory,
            sync: SyncOptions(
                interval: .seconds(3600), retry: RetryPolicy(initial: .milliseconds(100), maximum: .milliseconds(400)),
                requestTimeout: .seconds(15), useWakeUpChannel: channel))
    }

    func enqueue(_ type: CommandType, device: String, assetIds: [String]? = nil) async throws -> Command {
        let list = try await services.commands.enqueue(
            applicationId: applicationId, EnqueueCommandRequest(type: type, deviceId: device, assetIds: assetIds))
        return try #require(list.commands.first)
    }

    func commandState(_ commandId: String) async throws -> CommandState {
        try await services.commands.command(applicationId: applicationId, commandId: commandId).state
    }

    /// Polls until the command reaches `state` (the ack travels in a sync of its own).
    func waitForCommand(_ commandId: String, toBe state: CommandState, timeout: Duration = .seconds(30)) async throws {
        let deadline = ContinuousClock.now + timeout
        while try await commandState(commandId) != state, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try await commandState(commandId) == state)
    }

    /// The application's events as the reporting API exports them, oldest first.
    func storedEvents(_ filter: EventFilter = EventFilter()) async throws -> [StoredEvent] {
        try await ClientSDKTests.storedEvents(services, applicationId: applicationId, filter)
    }

    /// Whether the backplane has what a remote wipe (or kill) of `device` logged: each asset
    /// deleted, then the reset.
    func hasWipeLog(device: String, assets: [String]) async throws -> Bool {
        let logged = try await storedEvents(EventFilter(deviceId: device))
        return logged.filter { $0.event.content.type == .assetDeleted }.compactMap(\.event.content.assetId).sorted() == assets.sorted()
            && logged.contains { $0.event.content.type == .reset && $0.event.content.resetType == .remoteWipe }
    }

    /// All devices of a user, as an admin sees them.
    func devices(user: String) async throws -> [Device] {
        try await services.devices.listDevices(
            applicationId: applicationId, filter: DeviceFilter(userId: user, includeUnregistered: true), cursor: nil, limit: 500
        ).devices
    }
}

/// Every event of an application matching `filter`, through the reporting export.
func storedEvents(_ services: BackplaneServices, applicationId: String, _ filter: EventFilter = EventFilter()) async throws -> [StoredEvent] {
    var all: [StoredEvent] = []
    try await services.events.export(applicationId: applicationId, filter: filter) { all += $0 }
    return all
}

/// Collects an engine's events in the background so tests can wait for one.
final class EventRecorder: Sendable {
    private let events = LockedBox<[SDKEvent]>([])
    private let task: Task<Void, Never>

    init(_ stream: AsyncStream<SDKEvent>) {
        let events = self.events
        task = Task {
            for await event in stream { events.withLock { $0.append(event) } }
        }
    }

    var all: [SDKEvent] { events.withLock { $0 } }
    var names: [String] { all.map(\.name) }

    /// Waits until an event matching `predicate` arrives (after `skipping` earlier ones).
    @discardableResult
    func wait(
        for name: String, timeout: Duration = .seconds(30), sourceLocation: SourceLocation = #_sourceLocation,
        where predicate: @Sendable (SDKEvent) -> Bool = { _ in true }
    ) async throws -> SDKEvent {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let event = all.first(where: { $0.name == name && predicate($0) }) { return event }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("no '\(name)' event within \(timeout); saw \(names)", sourceLocation: sourceLocation)
        throw CancellationError()
    }

    func count(_ name: String) -> Int { names.filter { $0 == name }.count }
}

/// A value under a lock that closures can share: `Synchronization.Mutex` in a class, since a
/// mutex itself cannot be captured.
final class LockedBox<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<Result: Sendable>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try mutex.withLock { value in try body(&value) }
    }
}

/// Where episodes that tests do not download point: port 9 (discard) on this machine refuses
/// at once, so the download engine's tries stay local and quick, and no test reaches the network.
let unreachableOrigin = "http://127.0.0.1:9"

/// Makes files to stand for downloaded content.
func makeContentFile(named name: String, bytes: Int = 4096) throws -> URL {
    let directory = temporaryDirectory("sdk-content-source")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let file = directory.appendingPathComponent(name)
    try Data(repeating: 7, count: bytes).write(to: file)
    return file
}

/// A transport that fails every request whose body matches, as if the network dropped it.
final class DroppingTransport: Transport {
    let inner: any Transport = HTTPClientTransport()
    let drops: @Sendable (TransportRequest) -> Bool

    init(drops: @escaping @Sendable (TransportRequest) -> Bool) {
        self.drops = drops
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        if drops(request) { throw URLError(.networkConnectionLost) }
        return try await inner.send(request)
    }
}

/// A transport that counts how many requests to one path are in flight at once.
final class CountingTransport: Transport {
    let inner: any Transport
    let path: String
    private let state = Mutex((current: 0, maximum: 0, total: 0))

    init(inner: any Transport = HTTPClientTransport(), path: String) {
        self.inner = inner
        self.path = path
    }

    var maximumConcurrent: Int { state.withLock { $0.maximum } }
    var total: Int { state.withLock { $0.total } }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let counted = request.url.path == path
        if counted {
            state.withLock {
                $0.current += 1
                $0.total += 1
                $0.maximum = max($0.maximum, $0.current)
            }
        }
        defer { if counted { state.withLock { $0.current -= 1 } } }
        // Widen the window in which a second sync could overlap.
        if counted { try await Task.sleep(for: .milliseconds(30)) }
        return try await inner.send(request)
    }
}
