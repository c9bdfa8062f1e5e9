import ArgumentParser
import ClientSDK
import Foundation
import Shared

/// Drives the ClientSDK from a terminal or a test, the way an app would.
@main
struct Harness: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backplane-harness",
        abstract: "Drive the Backplane ClientSDK from the command line.",
        discussion: """
            Connection options may also come from the environment: BACKPLANE_URL, BACKPLANE_APP_KEY,
            BACKPLANE_APP_SECRET, BACKPLANE_USER. Output is JSON on stdout.
            Exit codes: 0 ok, 1 other error, 3 device limit reached, 4 invalid credentials,
            5 backplane unreachable, 6 device registered to another user, 7 device unregistered,
            8 not found (e.g. an unknown feed).
            """,
        subcommands: [
            Register.self, Sync.self, Status.self, Devices.self, EnableDownload.self, Unregister.self, Watch.self, Simulate.self,
            AddFile.self, Assets.self, Subscribe.self, Unsubscribe.self, Feeds.self, CMSPublish.self, Log.self,
        ])
}

// MARK: options

struct ConnectionOptions: ParsableArguments {
    @Option(help: "Backplane URL (or BACKPLANE_URL).") var url: String?
    @Option(help: "App key id (or BACKPLANE_APP_KEY).") var key: String?
    @Option(help: "App key secret (or BACKPLANE_APP_SECRET).") var secret: String?
    @Option(help: "User id (or BACKPLANE_USER).") var user: String?
    @Option(help: "The SDK's data directory: one per simulated device.") var dataDir = "./harness-data"
    @Option(help: "External device id to register with.") var externalId: String?
    @Option(help: "Nickname to register with.") var nickname: String?
    @Flag(help: "Move the device when it is registered to another user.") var move = false
    @Option(help: "Request timeout in seconds.") var timeout = 10

    func configuration(dataDirectory: URL? = nil) throws -> BackplaneClientConfiguration {
        let environment = ProcessInfo.processInfo.environment
        func value(_ option: String?, _ variable: String, _ name: String) throws -> String {
            guard let value = option ?? environment[variable], !value.isEmpty else {
                throw ValidationError("Missing --\(name) (or \(variable)).")
            }
            return value
        }
        let urlText = try value(url, "BACKPLANE_URL", "url")
        guard let backplaneURL = URL(string: urlText), backplaneURL.scheme != nil else {
            throw ValidationError("'\(urlText)' is not a URL.")
        }
        return BackplaneClientConfiguration(
            backplaneURL: backplaneURL, appKeyId: try value(key, "BACKPLANE_APP_KEY", "key"),
            appKeySecret: try value(secret, "BACKPLANE_APP_SECRET", "secret"),
            userId: try value(user, "BACKPLANE_USER", "user"),
            dataDirectory: dataDirectory ?? URL(fileURLWithPath: dataDir), externalDeviceId: externalId, nickname: nickname,
            model: "backplane-harness", appVersion: "harness", moveFromOtherUser: move,
            retry: RetryPolicy(initial: .seconds(1), maximum: .seconds(30)), requestTimeout: .seconds(timeout),
            // One-shot commands sync once; only `watch` keeps the wake-up channel open.
            useWakeUpChannel: false)
    }
}

// MARK: commands

struct Register: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Register this device (idempotent) and sync once.")
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await Session.run(try connection.configuration(), Session.requireSynced)
    }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Sync once (registering first if needed).")
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await Session.run(try connection.configuration(), Session.requireSynced)
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show what the SDK has stored, without the network.")
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let engine = BackplaneEngine(configuration: try connection.configuration())
        do {
            try await engine.loadLocalState()
        } catch let error as BackplaneClientError {
            Output.fail(error)
        }
        Output.print(StatusOutput(await engine.status))
    }
}

struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the user's devices.")
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await Session.run(try connection.configuration()) { engine in
            let devices = try await engine.userDevices()
            return .object([
                "devices": Output.json(devices.devices),
                "downloadEnabledCount": .int(Int64(devices.downloadEnabledCount)),
                "deviceLimit": .int(Int64(devices.settings.deviceLimit)),
            ])
        }
    }
}

struct EnableDownload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enable-download", abstract: "Ask the backplane to turn download on or off for this device.")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "on or off") var setting: OnOff

    enum OnOff: String, ExpressibleByArgument {
        case on, off
    }

    func run() async throws {
        try await Session.run(try connection.configuration()) { engine in
            let device = try await engine.updateDownloadEnabled(setting == .on)
            return .object(["device": Output.json(device)])
        }
    }
}

struct Unregister: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Unregister this device.")
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await Session.run(try connection.configuration()) { engine in
            try await engine.unregister()
            return nil
        }
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print SDK events as JSON lines until interrupted (SIGINT/SIGTERM).")
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "Sync interval in seconds.") var interval = 30
    @Flag(help: "Do not open the wake-up channel; rely on interval syncs.") var noChannel = false

    func run() async throws {
        var configuration = try connection.configuration()
        configuration.syncInterval = .seconds(interval)
        configuration.useWakeUpChannel = !noChannel
        let engine = BackplaneEngine(configuration: configuration)
        let events = engine.events()
        let stop = SignalWatcher(signals: [SIGINT, SIGTERM]) {
            Task { await engine.shutdown() }
        }
        defer { stop.cancel() }
        let printer = Task {
            for await event in events {
                Output.line(EventOutput(event))
            }
        }
        do {
            try await engine.start()
        } catch let error as BackplaneClientError {
            await engine.shutdown()
            await printer.value
            Output.fail(error)
        }
        await printer.value
    }
}

struct Simulate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start N devices of one user, each with its own data directory, and summarise.")
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "How many devices (all of the --user).") var devices = 10
    @Option(help: "How many devices start at the same time.") var concurrency = 16

    func validate() throws {
        guard (1...10_000).contains(devices) else { throw ValidationError("--devices must be 1 to 10000.") }
        guard (1...256).contains(concurrency) else { throw ValidationError("--concurrency must be 1 to 256.") }
    }

    func run() async throws {
        let base = URL(fileURLWithPath: connection.dataDir)
        let configurations = try (0..<devices).map { index in
            try connection.configuration(dataDirectory: base.appendingPathComponent("sim-\(index)"))
        }
        let started = Date()
        var summary = SimulationSummary(devices: devices)
        try await withThrowingTaskGroup(of: SimulationSummary.Result.self) { group in
            var next = 0
            func launch() {
                let configuration = configurations[next]
                next += 1
                group.addTask { await SimulationSummary.Result.of(configuration) }
            }
            while next < min(concurrency, configurations.count) { launch() }
            while let result = try await group.next() {
                summary.add(result)
                let done = summary.registered + summary.failed
                if done % max(1, devices / 10) == 0 || done == devices {
                    FileHandle.standardError.write(Data("simulate: \(done)/\(devices) done, \(summary.downloadEnabled) enabled, \(summary.failed) failed\n".utf8))
                }
                if next < configurations.count { launch() }
            }
        }
        summary.seconds = Date().timeIntervalSince(started)
        Output.print(summary)
        if summary.failed > 0 { throw ExitCode(1) }
    }
}

struct AddFile: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-file",
        abstract: "Put a real file in place as a downloaded asset (until the download engine exists).")
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The asset id.") var asset: String
    @Option(help: "The file to copy in.") var file: String

    func run() async throws {
        let engine = BackplaneEngine(configuration: try connection.configuration())
        do {
            let added = try await engine.addDownloadedAsset(assetId: asset, copying: URL(fileURLWithPath: file))
            Output.print(AssetOutput(added, url: await engine.fileURL(of: added)))
        } catch let error as BackplaneClientError {
            Output.fail(error)
        }
    }
}

extension EventType: ExpressibleByArgument {}
extension AssetDeletionReason: ExpressibleByArgument {}
extension ResetType: ExpressibleByArgument {}
extension DownloadLimitType: ExpressibleByArgument {}

struct Log: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Log events through the SDK's event logger, then upload the queue (unless --queue-only).",
        discussion: "Example: log --type downloadStart --asset ep-1; log --type custom --name rating --number 4 --count 100")
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The event type (\(EventType.allCases.map(\.rawValue).joined(separator: ", "))).") var type: EventType
    @Option(help: "Asset id.") var asset: String?
    @Option(help: "assetDeleted: internal, remote, user, userChange, failedDownload or deleteAll.") var reason: AssetDeletionReason?
    @Option(help: "reset: install or remoteWipe.") var reset: ResetType?
    @Option(help: "downloadLimitReached: account, asset, copies, device or external.") var limit: DownloadLimitType?
    @Option(help: "Bits per second.") var bitrate: Int64?
    @Option(help: "Seconds.") var duration: Double?
    @Option(help: "Error code.") var errorCode: String?
    @Option(help: "Error message.") var errorMessage: String?
    @Option(help: "custom: the event's name.") var name: String?
    @Option(help: "custom: a string value.") var string: String?
    @Option(help: "custom: a numeric value.") var number: Double?
    @Option(help: "How many copies to log.") var count = 1
    @Flag(help: "Only queue the events (no network); they go up with a later command.") var queueOnly = false

    func run() async throws {
        let content = EventContent(
            type: type, assetId: asset, deletionReason: reason, resetType: reset, limitType: limit, bitrate: bitrate,
            durationSeconds: duration, errorCode: errorCode, errorMessage: errorMessage, customName: name, customString: string,
            customNumber: number)
        let configuration = try connection.configuration()
        let engine = BackplaneEngine(configuration: configuration)
        var logged = 0
        do {
            for _ in 0..<max(count, 0) where try engine.eventLogger.log(content) != nil { logged += 1 }
        } catch let error as BackplaneClientError {
            Output.fail(error)
        }
        if queueOnly {
            Output.print(JSONValue.object([
                "logged": .int(Int64(logged)), "queued": .int(Int64((try? engine.eventLogger.queuedCount()) ?? 0)),
            ]))
            return
        }
        // Start uploads what is queued after its sync; uploadEvents waits for that to finish.
        try await Session.run(configuration) { engine in
            try await engine.uploadEvents()
            return .object(["logged": .int(Int64(logged)), "queued": .int(Int64(try engine.eventLogger.queuedCount()))])
        }
    }
}

struct Assets: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the downloaded assets and the subscription queue the SDK holds (local, no network).")
    @OptionGroup var connection: ConnectionOptions

    struct Listing: Encodable {
        var assets: [AssetOutput]
        var queue: [SubscriptionItem]
    }

    func run() async throws {
        let engine = BackplaneEngine(configuration: try connection.configuration())
        do {
            var outputs: [AssetOutput] = []
            for asset in try await engine.downloadedAssets() {
                outputs.append(AssetOutput(asset, url: await engine.fileURL(of: asset)))
            }
            Output.print(Listing(assets: outputs, queue: try await engine.subscriptions.items()))
        } catch let error as BackplaneClientError {
            Output.fail(error)
        }
    }
}

struct Subscribe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Subscribe to a feed (or change its rules) and sync its episodes.")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The feed id.") var feed: String
    @Option(help: "Keep at most this many items of the feed (0: unlimited).") var maxItems: Int?
    @Option(help: "At the quota: true resets the oldest items, false defers new ones.") var autodelete: Bool?

    func run() async throws {
        try await Session.run(try connection.configuration()) { engine in
            let subscription = try await engine.subscriptions.subscribe(feedId: feed, maxItems: maxItems, autodeleteOldItems: autodelete)
            return .object([
                "subscription": Output.json(subscription),
                "queue": Output.json(try await engine.subscriptions.items(feedId: feed)),
            ])
        }
    }
}

struct Unsubscribe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Unsubscribe from a feed (queued and downloaded items stay).")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The feed id.") var feed: String

    func run() async throws {
        try await Session.run(try connection.configuration()) { engine in
            try await engine.subscriptions.unsubscribe(feedId: feed)
            return nil
        }
    }
}

struct Feeds: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List this device's subscriptions (after a sync).")
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await Session.run(try connection.configuration()) { engine in
            .object(["subscriptions": Output.json(try await engine.subscriptions.list())])
        }
    }
}

/// The CMS side, for demos and tests: creates the feed if needed and publishes episodes.
struct CMSPublish: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cms-publish",
        abstract: "As the CMS: create a feed if needed and publish test episodes (needs a token of scope cms).")
    @Option(help: "Backplane URL (or BACKPLANE_URL).") var url: String?
    @Option(help: "A bearer token of scope cms (or BACKPLANE_CMS_TOKEN).") var token: String?
    @Option(help: "The feed id.") var feed: String
    @Option(help: "The feed title (when it is created).") var title: String?
    @Option(parsing: .upToNextOption, help: "Asset ids to publish.") var asset: [String]
    @Flag(help: "Publish asset ids only, without download metadata.") var assetIdOnly = false

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let base = (url ?? environment["BACKPLANE_URL"]).flatMap(URL.init(string:)) else {
            throw ValidationError("Missing --url (or BACKPLANE_URL).")
        }
        guard let token = token ?? environment["BACKPLANE_CMS_TOKEN"] else {
            throw ValidationError("Missing --token (or BACKPLANE_CMS_TOKEN).")
        }
        let transport = HTTPClientTransport()
        func call(_ method: String, _ path: String, _ body: some Encodable) async throws -> Data {
            let response = try await transport.send(TransportRequest(
                method: method, url: base.appendingPathComponent(path),
                headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")],
                body: try Output.encoder.encode(body), timeout: .seconds(30)))
            guard (200..<300).contains(response.status) else {
                FileHandle.standardError.write(Data("backplane-harness: \(method) \(path): HTTP \(response.status) \(String(decoding: response.body, as: UTF8.self))\n".utf8))
                throw ExitCode(response.status == 401 || response.status == 403 ? 4 : 1)
            }
            return response.body
        }
        _ = try await call("PUT", "v1/cms/feeds/\(feed)", FeedInput(title: title ?? feed))
        let episodes = asset.map { id in
            assetIdOnly ? EpisodeInput(assetId: id)
                : EpisodeInput(assetId: id, title: "Episode \(id)", downloadURL: "https://cdn.example.com/\(feed)/\(id).mp4", mediaType: .file)
        }
        let answer = try await call("POST", "v1/cms/feeds/\(feed)/episodes", PublishEpisodesRequest(episodes: episodes))
        FileHandle.standardOutput.write(answer + Data("\n".utf8))
    }
}

struct AssetOutput: Encodable {
    var assetId: String
    var path: String?
    var size: Int64
    var fileExists: Bool

    init(_ asset: LocalAsset, url: URL?) {
        assetId = asset.assetId
        path = url?.path
        size = asset.size
        fileExists = url.map { FileManager.default.fileExists(atPath: $0.path) } ?? false
    }
}

// MARK: running one engine for one command

enum Session {
    /// Starts an engine, runs `body`, shuts down, and prints the final status, the events seen and
    /// what `body` returned. Errors end the process with the documented exit codes.
    static func run(_ configuration: BackplaneClientConfiguration, _ body: (BackplaneEngine) async throws -> JSONValue?) async throws {
        let engine = BackplaneEngine(configuration: configuration)
        let events = engine.events()
        var result: JSONValue?
        var failure: BackplaneClientError?
        do {
            try await engine.start()
            result = try await body(engine)
        } catch let error as BackplaneClientError {
            failure = error
        }
        let status = await engine.status
        await engine.shutdown()
        var seen: [EventOutput] = []
        for await event in events { seen.append(EventOutput(event)) }

        var output: [String: JSONValue] = [
            "status": Output.json(StatusOutput(status)),
            "events": .array(seen.map { .string($0.event) }),
        ]
        if let result { output["result"] = result }
        if let failure {
            output["error"] = Output.json(ErrorOutput(failure))
            Output.print(JSONValue.object(output))
            throw ExitCode(Output.exitCode(for: failure))
        }
        Output.print(JSONValue.object(output))
    }

    /// After `start()`, which registers if needed and syncs once: fail unless that sync succeeded.
    static func requireSynced(_ engine: BackplaneEngine) async throws -> JSONValue? {
        let status = await engine.status
        if let error = status.lastError { throw error }
        guard status.isRegistered else {
            throw BackplaneClientError(kind: .notRunning, message: "The device is not registered.")
        }
        return nil
    }
}

// MARK: output

enum Output {
    static let encoder: JSONEncoder = {
        let encoder = WireJSON.encoder()
        encoder.outputFormatting.insert(.withoutEscapingSlashes)  // URLs stay readable in a terminal
        return encoder
    }()

    static func json(_ value: some Encodable) -> JSONValue {
        (try? JSONDecoder().decode(JSONValue.self, from: encoder.encode(value))) ?? .null
    }

    static func print(_ value: some Encodable) {
        line(value)
    }

    /// One JSON value on one line, flushed at once (watch output is read while it runs).
    static func line(_ value: some Encodable) {
        guard let data = try? encoder.encode(value) else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    static func exitCode(for error: BackplaneClientError) -> Int32 {
        switch (error.kind, error.code) {
        case (.server, .deviceLimitReached): 3
        case (.server, .invalidCredentials), (.server, .invalidSignature): 4
        case _ where error.isTransient: 5
        case (.server, .deviceAlreadyRegistered): 6
        case (.server, .deviceUnregistered), (.notRunning, _): 7
        case (.server, .notFound): 8
        default: 1
        }
    }

    static func fail(_ error: BackplaneClientError) -> Never {
        FileHandle.standardError.write(Data("backplane-harness: \(error)\n".utf8))
        exit(exitCode(for: error))
    }
}

struct ErrorOutput: Encodable {
    var kind: String
    var code: String?
    var status: Int?
    var message: String

    init(_ error: BackplaneClientError) {
        kind = error.kind.rawValue
        code = error.code?.rawValue
        status = error.status
        message = error.description
    }
}

struct StatusOutput: Encodable {
    var state: String
    var deviceId: String?
    var userId: String
    var isRegistered: Bool
    var downloadEnabled: Bool?
    var device: Device?
    var settings: ApplicationSettings?
    var lastSyncAt: Date?
    var clockOffsetSeconds: Double
    var lastError: ErrorOutput?

    init(_ status: BackplaneEngine.Status) {
        state = status.state.rawValue
        deviceId = status.deviceId
        userId = status.userId
        isRegistered = status.isRegistered
        downloadEnabled = status.device?.downloadEnabled
        device = status.device
        settings = status.settings
        lastSyncAt = status.lastSyncAt
        clockOffsetSeconds = status.clockOffset
        lastError = status.lastError.map(ErrorOutput.init)
    }
}

struct EventOutput: Encodable {
    var event: String
    var at = Date()
    var deviceId: String?
    var outcome: String?
    var downloadEnabled: Bool?
    var deviceLimit: Int?
    var enabledCount: Int?
    var settings: ApplicationSettings?
    var error: ErrorOutput?
    var assetIds: [String]?
    var reason: String?
    var connected: Bool?
    var feedId: String?
    var status: String?
    var summary: [String: Int]?
    var count: Int?
    var rejected: [EventResult]?

    init(_ event: SDKEvent) {
        self.event = event.name
        switch event {
        case .registered(let device, let outcome):
            deviceId = device.deviceId
            self.outcome = outcome.rawValue
            downloadEnabled = device.downloadEnabled
        case .deviceAlreadyRegistered(let id):
            deviceId = id
        case .deviceLimitReached(let limit, let count):
            deviceLimit = limit
            enabledCount = count
        case .invalidCredentials(let error), .communicationsFailure(let error):
            self.error = ErrorOutput(error)
        case .syncCompleted(let result):
            deviceId = result.device.deviceId
            downloadEnabled = result.device.downloadEnabled
        case .downloadEnabledChanged(let enabled):
            downloadEnabled = enabled
        case .settingsChanged(let settings):
            self.settings = settings
        case .remoteWipe(let deleted):
            assetIds = deleted
        case .assetsDeleted(let deleted, let reason):
            assetIds = deleted
            self.reason = reason.rawValue
        case .channelStateChanged(let connected):
            self.connected = connected
        case .assetAdded(let item), .assetDeferred(let item):
            assetIds = [item.assetId]
            feedId = item.feedId
        case .subscriptionAssetDeleted(let assetId, let feedId, let reason):
            assetIds = [assetId]
            self.feedId = feedId
            self.reason = reason.rawValue
        case .subscriptionStatusChanged(let status):
            self.status = status.rawValue
        case .subscriptionSyncFinished(let summary):
            self.summary = [
                "changes": summary.changes, "added": summary.added, "deferred": summary.deferred,
                "removed": summary.removed, "reset": summary.reset,
            ]
        case .logsSent(let count):
            self.count = count
        case .logsRejected(let results):
            rejected = results
        case .unregistered, .startingRemoteKill, .remoteKill:
            break
        }
    }
}

struct SimulationSummary: Encodable {
    var devices: Int
    var registered = 0
    var downloadEnabled = 0
    var deviceLimitReached = 0
    var failed = 0
    var failures: [String: Int] = [:]
    var seconds: Double = 0

    enum Result: Sendable {
        case registered(downloadEnabled: Bool, limitReached: Bool)
        case failed(String)

        static func of(_ configuration: BackplaneClientConfiguration) async -> Result {
            let engine = BackplaneEngine(configuration: configuration)
            let events = engine.events()
            do {
                try await engine.start()
                let status = await engine.status
                await engine.shutdown()
                var limitReached = false
                for await event in events {
                    if case .deviceLimitReached = event { limitReached = true }
                }
                if let error = status.lastError { return .failed(error.code?.rawValue ?? error.kind.rawValue) }
                return .registered(downloadEnabled: status.device?.downloadEnabled ?? false, limitReached: limitReached)
            } catch let error as BackplaneClientError {
                await engine.shutdown()
                return .failed(error.code?.rawValue ?? error.kind.rawValue)
            } catch {
                await engine.shutdown()
                return .failed("\(error)")
            }
        }
    }

    mutating func add(_ result: Result) {
        switch result {
        case .registered(let enabled, let limitReached):
            registered += 1
            if enabled { downloadEnabled += 1 }
            if limitReached { deviceLimitReached += 1 }
        case .failed(let reason):
            failed += 1
            failures[reason, default: 0] += 1
        }
    }
}

/// Calls `handler` once when one of `signals` arrives (instead of the default: dying).
final class SignalWatcher: @unchecked Sendable {
    private var sources: [any DispatchSourceSignal] = []

    init(signals: [Int32], handler: @escaping @Sendable () -> Void) {
        for number in signals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler(handler: handler)
            source.resume()
            sources.append(source)
        }
    }

    func cancel() {
        sources.forEach { $0.cancel() }
    }
}
