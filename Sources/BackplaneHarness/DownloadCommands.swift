import ArgumentParser
import ClientSDK
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The download queue: queue an asset (and optionally run the engine until it is done), list,
// pause, resume, remove, clear retries, and the master switch.

struct Download: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Queue an asset for download; with --wait, run the engine until it completes (exit 0), fails (exit 9), the backplane denies it (exit 11) or a rule blocks it (exit 12).",
        discussion: """
            Queueing an asset that failed (its tries used up) clears its retries and tries it again, as
            clear-retries would. With --wait, an asset that cannot move while the harness waits (downloads
            switched off, no room under the storage rules, the device's or the application's download
            limits, a device the backplane did not enable for download, conditions the stood-in device does
            not meet: --require-charging, --min-battery, --require-unmetered) is printed with its block and the
            harness exits 12 at once.
            """)
    @OptionGroup var connection: ConnectionOptions
    @Option(name: .customLong("asset-id"), help: "The asset id.") var assetId: String
    @Option(help: "The http(s) URL of the file, the HLS playlist, the DASH MPD or the Smooth Streaming manifest.") var url: String
    @Flag(help: "The URL is an HLS playlist.") var hls = false
    @Flag(help: "The URL is a DASH MPD.") var dash = false
    @Flag(help: "The URL is a Smooth Streaming client manifest.") var smooth = false
    @Option(name: .customLong("max-bitrate"), help: "HLS and DASH: the highest video bit rate (0: the lowest stream).") var maxBitrate: Int?
    @Option(help: "HLS and DASH: audio languages, comma-separated (\"\" for none; default all).") var audio: String?
    @Option(help: "HLS and DASH: subtitle languages, comma-separated (\"\" for none; default all).") var subtitles: String?
    @Option(name: .customLong("mime"), help: "Allowed media Content-Type (repeatable; default any).") var mimeTypes: [String] = []
    @Option(name: .customLong("ancillary"), help: "A file that travels with the title, as tag=URL (repeatable).") var ancillaries: [String] = []
    @Option(help: "HLS, DASH and Smooth Streaming: only the part of the title from this many seconds (whole segments).") var from: Double?
    @Option(help: "HLS, DASH and Smooth Streaming: only the part of the title up to this many seconds (whole segments).") var to: Double?
    @OptionGroup var pace: DownloadPaceOptions
    @Flag(inversion: .prefixedNo, help: "Flush each file to disk before it counts as downloaded (the SDK's default: no).") var flushFiles = false
    @Flag(help: "Run the engine until the asset completes or fails, showing progress.") var wait = false
    @Flag(help: "Print what the asset would take and whether it fits (bytes, isExact, basis, room, shortfall) without queueing it.") var estimate = false
    @Option(name: .customLong("max-storage"), help: "Bytes the SDK's downloads may occupy in all (default: no limit).") var maxStorage: Int64?
    @OptionGroup var device: DeviceConditionOptions

    func run() async throws {
        guard let remote = URL(string: url) else { Output.fail(BackplaneClientError(kind: .invalidInput, message: "Not a URL: \(url)")) }
        guard [hls, dash, smooth].filter({ $0 }).count <= 1 else {
            Output.fail(BackplaneClientError(kind: .invalidInput, message: "Only one of --hls, --dash and --smooth may be given."))
        }
        var files: [AncillaryFile] = []
        for value in ancillaries {
            let parts = value.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, let url = URL(string: String(parts[1])) else {
                Output.fail(BackplaneClientError(kind: .invalidInput, message: "--ancillary takes tag=URL, not \(value)"))
            }
            files.append(AncillaryFile(tag: String(parts[0]), url: url))
        }
        let request = DownloadRequest(
            assetId: assetId, url: remote, kind: hls ? .hls : dash ? .dash : smooth ? .smooth : .file, allowedMIMETypes: mimeTypes.isEmpty ? nil : Set(mimeTypes),
            maxVideoBitrate: maxBitrate, audioLanguages: audio.map(Self.languages), subtitleLanguages: subtitles.map(Self.languages),
            ancillaries: files, timeRange: from == nil && to == nil ? nil : MediaTimeRange(start: from ?? 0, end: to))
        var configuration = try connection.configuration()
        pace.apply(to: &configuration.downloads)
        configuration.downloads.flushesFiles = flushFiles
        configuration.downloads.maxStorage = maxStorage
        device.apply(to: &configuration.downloads)
        let engine = BackplaneEngine(configuration: configuration)
        if estimate {
            do {
                Output.print(EstimateOutput(try await engine.downloads.estimate(request)))
            } catch let error as BackplaneClientError {
                Output.fail(error)
            }
            return
        }
        guard wait else {
            do {
                Output.print(DownloadOutput(try await engine.downloads.enqueue(request)))
            } catch let error as BackplaneClientError {
                Output.fail(error)
            }
            return
        }
        try await DownloadWaiter(engine: engine, assetId: assetId).run { try await engine.downloads.enqueue(request) }
    }

    static func languages(_ list: String) -> [String] {
        list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}

/// Runs the engine until one asset completes or fails, printing its progress: a bar on a
/// terminal, JSON lines otherwise.
struct DownloadWaiter {
    let engine: BackplaneEngine
    let assetId: String

    func run(queue: () async throws -> DownloadAsset) async throws {
        let events = engine.events()
        let stop = SignalWatcher(signals: [SIGINT, SIGTERM]) { [engine] in Task { await engine.shutdown() } }
        defer { stop.cancel() }
        let terminal = isatty(STDOUT_FILENO) == 1
        do {
            // The first sync goes on while the asset is checked and queued, as it would in an
            // app whose engine is running already.
            async let started: Void = engine.start()
            let queued = try await queue()
            if queued.state == .completed { finish(queued, terminal: terminal) }
            try await started
        } catch let error as BackplaneClientError {
            await engine.shutdown()
            Output.fail(error)
        }
        // Blocked already (a block is not announced again): waiting would be waiting forever.
        try await stopIfStuck(terminal: terminal)
        for await event in events {
            switch event {
            case .downloadsBlocked:
                try await stopIfStuck(terminal: terminal)
            case .downloadProgress(assetId, let bytes, let expected, let fraction) where terminal:
                Self.bar(bytes: bytes, expected: expected, fraction: fraction)
            case .downloadCompleted(let asset) where asset.assetId == assetId:
                finish(asset, terminal: terminal)
            case .downloadError(assetId, let failure, willRetry: false):
                await engine.shutdown()
                if terminal { FileHandle.standardOutput.write(Data("\n".utf8)) }
                FileHandle.standardError.write(Data("backplane-harness: \(assetId) failed: \(failure.message)\n".utf8))
                Output.line(EventOutput(event))
                throw ExitCode(9)
            case .downloadDenied(assetId, _, _, _):
                // Asked again later by a running app; the harness says so and stops.
                let asset = try? await engine.downloads.asset(assetId)
                await engine.shutdown()
                if terminal { FileHandle.standardOutput.write(Data("\n".utf8)) }
                if let asset { Output.print(DownloadOutput(asset)) }
                throw ExitCode(11)
            case .unregistered, .remoteKill:
                await engine.shutdown()
                throw ExitCode(7)
            default:
                if !terminal, Self.isAboutDownloads(event) { Output.line(EventOutput(event)) }
            }
        }
        // The stream ended: the engine was shut down (a signal) before the asset was done.
        throw ExitCode(130)
    }

    /// Blocks that nothing the harness does while it waits can lift: the user must act (free
    /// room, raise a limit, remove downloads, switch downloads on, or have the device enabled).
    static func cannotMove(_ block: DownloadBlock, deviceRefused: Bool) -> Bool {
        switch block {
        case .switchedOff, .storage, .maxDownloadedAssets, .maxDownloadsPerDevice: true
        // The harness's power and network hold for its whole run.
        case .charging, .battery, .meteredNetwork: true
        // Only once the backplane said so: before the first sync it has not said yet.
        case .deviceNotDownloadEnabled: deviceRefused
        default: false
        }
    }

    /// Exits 12 with the asset and its block when it cannot move.
    private func stopIfStuck(terminal: Bool) async throws {
        guard let asset = try? await engine.downloads.asset(assetId), case .blocked(let block) = asset.state else { return }
        let deviceRefused = await engine.status.device?.downloadEnabled == false
        guard Self.cannotMove(block, deviceRefused: deviceRefused) else { return }
        await engine.shutdown()
        if terminal { FileHandle.standardOutput.write(Data("\n".utf8)) }
        Output.print(DownloadOutput(asset))
        FileHandle.standardError.write(Data("backplane-harness: \(assetId) cannot move: \(Self.explain(block, asset))\n".utf8))
        throw ExitCode(12)
    }

    static func explain(_ block: DownloadBlock, _ asset: DownloadAsset) -> String {
        switch block {
        case .switchedOff: "downloads are switched off (set-downloads on)."
        case .storage:
            if let shortfall = asset.storageShortfall {
                "it needs \(shortfall) bytes more than the storage rules leave (free space, raise --max-storage, or remove downloads)."
            } else {
                "the storage rules leave no room for its next file (free space, raise --max-storage, or remove downloads)."
            }
        case .maxDownloadedAssets: "the device holds as many downloaded assets as the SDK's limit allows (remove one)."
        case .maxDownloadsPerDevice: "the device holds as many downloads as the application allows (remove one)."
        case .deviceNotDownloadEnabled: "the backplane has not enabled this device for download (the user's device limit)."
        case .charging: "downloads wait for a charger (--require-charging), and the device is off one (--unplugged)."
        case .battery: "off a charger, downloads wait for the battery to reach --min-battery."
        case .meteredNetwork: "downloads wait for an unmetered network (--require-unmetered), and this one is metered."
        default: "\(block.rawValue)."
        }
    }

    private func finish(_ asset: DownloadAsset, terminal: Bool) -> Never {
        if terminal { FileHandle.standardOutput.write(Data("\n".utf8)) }
        Output.print(DownloadOutput(asset))
        // The engine's state is on disk; nothing is lost by leaving without a shutdown.
        exit(0)
    }

    private static func isAboutDownloads(_ event: SDKEvent) -> Bool {
        event.name.hasPrefix("download")
    }

    private static func bar(bytes: Int64, expected: Int64?, fraction: Double?) {
        let width = 30
        let filled = Int((fraction ?? 0) * Double(width))
        let megabytes = { (value: Int64) in String(format: "%.1f", Double(value) / 1_000_000) }
        let total = expected.map { "/\(megabytes($0))" } ?? ""
        let percent = fraction.map { String(format: "%3.0f%%", $0 * 100) } ?? "  ?%"
        let line = "\r[\(String(repeating: "#", count: filled))\(String(repeating: ".", count: width - filled))] \(percent) \(megabytes(bytes))\(total) MB"
        FileHandle.standardOutput.write(Data(line.utf8))
    }
}

struct Queue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the download queue in order (local, no network).")
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let engine = BackplaneEngine(configuration: try connection.configuration())
        do {
            Output.print(["queue": try await engine.downloads.queue().map(DownloadOutput.init)])
        } catch let error as BackplaneClientError {
            Output.fail(error)
        }
    }
}

/// Applies a queue change and prints the queue after it.
private func runQueueChange(_ connection: ConnectionOptions, _ change: (DownloadManager) async throws -> Void) async throws {
    let engine = BackplaneEngine(configuration: try connection.configuration())
    do {
        try await change(engine.downloads)
        Output.print(["queue": try await engine.downloads.queue().map(DownloadOutput.init)])
    } catch let error as BackplaneClientError {
        Output.fail(error)
    }
}

struct Pause: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Pause one queued asset, or all.")
    @OptionGroup var connection: ConnectionOptions
    @Option(name: .customLong("asset-id"), help: "The asset (default: all).") var assetId: String?
    func run() async throws { try await runQueueChange(connection) { try await $0.pause(assetId: assetId) } }
}

struct Resume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Resume one paused asset, or all.")
    @OptionGroup var connection: ConnectionOptions
    @Option(name: .customLong("asset-id"), help: "The asset (default: all).") var assetId: String?
    func run() async throws { try await runQueueChange(connection) { try await $0.resume(assetId: assetId) } }
}

struct Remove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Remove an asset from the queue or the device, with its files.")
    @OptionGroup var connection: ConnectionOptions
    @Option(name: .customLong("asset-id"), help: "The asset.") var assetId: String
    func run() async throws { try await runQueueChange(connection) { try await $0.remove(assetId: assetId) } }
}

struct UpdateURL: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update-url",
        abstract: "Swap the URL of a queued asset, keeping what is on disk (HLS and DASH: refused unless the new manifests describe the same media).")
    @OptionGroup var connection: ConnectionOptions
    @Option(name: .customLong("asset-id"), help: "The asset.") var assetId: String
    @Option(help: "The new http(s) URL.") var url: String
    func run() async throws {
        guard let remote = URL(string: url) else { Output.fail(BackplaneClientError(kind: .invalidInput, message: "Not a URL: \(url)")) }
        try await runQueueChange(connection) { try await $0.updateURL(assetId: assetId, url: remote) }
    }
}

struct ClearRetries: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clear-retries", abstract: "Clear the error count of one asset, or all, so failed assets are tried again.")
    @OptionGroup var connection: ConnectionOptions
    @Option(name: .customLong("asset-id"), help: "The asset (default: all).") var assetId: String?
    func run() async throws { try await runQueueChange(connection) { try await $0.clearRetries(assetId: assetId) } }
}

struct SetDownloads: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-downloads", abstract: "Turn the download master switch on or off (kept across restarts).")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "on or off") var value: String
    func run() async throws {
        guard ["on", "off"].contains(value) else { throw ValidationError("Say on or off.") }
        try await runQueueChange(connection) { try await $0.setEnabled(value == "on") }
    }
}

struct DownloadOutput: Encodable {
    var assetId: String
    var state: String
    var url: String
    var kind: String
    var bytesDownloaded: Int64
    var expectedBytes: Int64?
    /// What it will take, known before its download started.
    var estimatedBytes: Int64?
    /// blocked by storage: the bytes it lacks, after the queue ahead of it.
    var storageShortfall: Int64?
    var fraction: Double?
    var errorCount: Int
    var failure: DownloadFailure?
    var blockedBy: String?
    /// What the backplane said: notAsked, granted or denied.
    var permission: String
    var grantId: String?
    /// denied: the rule at its limit, every count, and whether only an admin can lift it.
    var denial: DownloadDenial?
    var position: Int?
    var path: String?
    /// Completed: each ancillary file on the device, by tag.
    var ancillaries: [String: String]?

    init(_ asset: DownloadAsset) {
        assetId = asset.assetId
        state = asset.state.name
        url = asset.request.url.absoluteString
        kind = asset.request.kind.rawValue
        bytesDownloaded = asset.bytesDownloaded
        expectedBytes = asset.expectedBytes
        estimatedBytes = asset.estimatedBytes
        storageShortfall = asset.storageShortfall
        fraction = asset.fraction
        errorCount = asset.errorCount
        position = asset.position
        path = asset.localURL?.path
        if !asset.ancillaries.isEmpty { ancillaries = Dictionary(asset.ancillaries.map { ($0.tag, $0.localURL.path) }, uniquingKeysWith: { first, _ in first }) }
        permission = asset.permission.name
        switch asset.permission {
        case .granted(let grantId): self.grantId = grantId
        case .denied(let denial): self.denial = denial
        case .notAsked: break
        }
        switch asset.state {
        case .failed(let reason): failure = reason
        case .blocked(let reason): blockedBy = reason.rawValue
        default: failure = asset.lastFailure
        }
    }
}

struct EstimateOutput: Encodable {
    var bytes: Int64
    var isExact: Bool
    /// What an inexact estimate rests on: `measured` (the first files' sizes, scaled) or
    /// `bandwidth` (the manifest's declared bandwidth × duration: the origin stated no size).
    var basis: String
    var room: Int64
    var shortfall: Int64?

    init(_ estimate: DownloadEstimate) {
        bytes = estimate.bytes
        isExact = estimate.isExact
        basis = estimate.basis.description
        room = estimate.room
        shortfall = estimate.shortfall
    }
}
