import ArgumentParser
import ClientSDK
import Foundation

// Playback rights of downloaded assets, judged locally on the SDK's trusted clock.

struct Rights: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print whether a downloaded asset may be played now, and why not (local, no network).")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The asset id.") var assetId: String

    func run() async throws {
        let engine = BackplaneEngine(configuration: try connection.configuration())
        do {
            Output.print(RightsOutput(assetId: assetId, try await engine.rights.rights(for: assetId), time: try await engine.rights.trustedTime()))
        } catch let error as BackplaneClientError {
            Output.fail(error)
        }
    }
}

struct Play: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record that playback of an asset starts (its expiry after play starts at the first) and print its rights; exits 10 when it may not be played.",
        discussion: """
            With --serve: starts the engine, prints one JSON line with the asset's playback "url" and "licenseUrl" (the SDK's \
            loopback playback server, which records the play start at the player's first request), then serves \
            it, downloads going on, until SIGINT or SIGTERM. A downloaded asset needs no network; a queued one \
            is served once the engine downloads it, while it downloads.
            """)
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The asset id.") var assetId: String
    @Option(help: "Also record that playback stopped after this many seconds.") var watched: Double?
    @Flag(help: "Serve the asset to a player over loopback HTTP until SIGINT or SIGTERM, printing its URL.") var serve = false

    func run() async throws {
        let engine = BackplaneEngine(configuration: try connection.configuration())
        if serve { return try await serveUntilStopped(engine) }
        do {
            let rights = try await engine.rights.recordPlayStart(assetId: assetId)
            if rights.isPlayable, let watched { try await engine.rights.recordPlayStop(assetId: assetId, watchedSeconds: watched) }
            Output.print(RightsOutput(assetId: assetId, rights, time: try await engine.rights.trustedTime()))
            if !rights.isPlayable { throw ExitCode(10) }
        } catch let error as BackplaneClientError {
            Output.fail(error)
        }
    }
}

extension Play {
    /// The asset's URL, printed once, then the engine runs (and serves) until a signal ends it.
    /// A downloaded asset's URL comes first: it needs the data directory only, not the backplane.
    /// A queued one's comes once the engine runs its download (it plays while it downloads).
    private func serveUntilStopped(_ engine: BackplaneEngine) async throws {
        let events = engine.events()
        let stop = SignalWatcher(signals: [SIGINT, SIGTERM]) {
            Task { await engine.shutdown() }
        }
        defer { stop.cancel() }
        var started = false
        do {
            var url: URL?
            if let queued = try await engine.downloads.asset(assetId), queued.state != .completed {
                Self.start(engine)
                started = true
                url = try await urlOnceDownloading(engine)
            }
            let rights = try await engine.playback.rights(for: assetId)
            guard rights.isPlayable else {
                Output.line(RightsOutput(assetId: assetId, rights, time: try await engine.rights.trustedTime()))
                await engine.shutdown()
                throw ExitCode(10)
            }
            let served = if let url { url } else { try await engine.playback.url(for: assetId) }
            Output.line(ServingOutput(
                url: served, licenseUrl: try await engine.playback.licenseURL(for: assetId),
                rights: RightsOutput(assetId: assetId, rights, time: try await engine.rights.trustedTime())))
        } catch let error as BackplaneClientError {
            // A signal while a queued asset waited for its download: nothing was served.
            if error.kind == .notRunning, started { return }
            await engine.shutdown()
            Output.fail(error)
        }
        if !started { Self.start(engine) }
        // The stream ends when a signal shuts the engine down.
        for await _ in events {}
    }

    /// The engine runs: queued downloads go on, syncs keep the rights' time trusted. Offline, it
    /// starts all the same and retries; a refusal is told, the serving goes on.
    private static func start(_ engine: BackplaneEngine) {
        Task {
            do {
                try await engine.start()
            } catch let error as BackplaneClientError {
                FileHandle.standardError.write(Data("backplane-harness: \(error)\n".utf8))
            }
        }
    }

    /// The URL of the queued asset once the engine downloads it; nil when it fails or leaves
    /// the queue first.
    private func urlOnceDownloading(_ engine: BackplaneEngine) async throws -> URL? {
        while true {
            do {
                return try await engine.playback.url(for: assetId)
            } catch let error as BackplaneClientError where error.kind == .invalidInput {
                guard let asset = try await engine.downloads.asset(assetId) else { return nil }
                if case .failed = asset.state { return nil }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}

/// `play --serve`'s line: where the player plays, and the asset's rights then.
struct ServingOutput: Encodable {
    var url: URL
    /// Where an EME player posts W3C ClearKey license requests (`engine.playback.licenseURL`).
    var licenseUrl: URL
    var assetId: String
    var rights: String
    var playable: Bool
    var until: Date?

    init(url: URL, licenseUrl: URL, rights: RightsOutput) {
        self.url = url
        self.licenseUrl = licenseUrl
        assetId = rights.assetId
        self.rights = rights.rights
        playable = rights.playable
        until = rights.until
    }
}

struct RightsOutput: Encodable {
    var assetId: String
    var rights: String
    var playable: Bool
    /// valid: when the window ends (absent: never).
    var until: Date?
    /// notYetAvailable: the publish date.
    var from: Date?
    /// expired: which end passed; untrustedTime: why there is no trusted time.
    var reason: String?
    /// offlinePeriodExceeded: the last sync.
    var lastSync: Date?
    var trustedTime: Date?

    init(assetId: String, _ rights: AssetRights, time: TrustedTime) {
        self.assetId = assetId
        self.rights = rights.name
        playable = rights.isPlayable
        trustedTime = time.date
        switch rights {
        case .valid(let until): self.until = until
        case .notYetAvailable(let from): self.from = from
        case .expired(let reason): self.reason = reason.rawValue
        case .offlinePeriodExceeded(let lastSync): self.lastSync = lastSync
        case .untrustedTime(let reason): self.reason = reason.rawValue
        case .noRights: break
        case .licenseExpired(let at): self.until = at
        }
    }
}
