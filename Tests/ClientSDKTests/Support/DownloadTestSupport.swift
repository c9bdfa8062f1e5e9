import ClientSDK
import Foundation
import Testing
import TestSupport

/// A backplane, an origin and an engine that downloads from it, for download tests.
struct DownloadBench {
    let server: InProcessBackplane
    let origin: TestOrigin
    let engine: BackplaneEngine
    let events: EventRecorder
    let dataDirectory: URL

    static func start(
        user: String = "dora", dataDirectory: URL = temporaryDirectory("sdk-download"), server: InProcessBackplane? = nil,
        origin: TestOrigin? = nil, options: (inout DownloadOptions) -> Void = { _ in },
        rights: (inout RightsOptions) -> Void = { _ in }
    ) async throws -> DownloadBench {
        let server = if let server { server } else { try await InProcessBackplane.start() }
        let origin = if let origin { origin } else { try await TestOrigin.start() }
        var configuration = server.configuration(user: user, dataDirectory: dataDirectory)
        configuration.downloads.retryPassDelay = .milliseconds(50)
        configuration.downloads.storageRecheck = .milliseconds(100)
        configuration.downloads.headroom = 0
        options(&configuration.downloads)
        rights(&configuration.rights)
        let engine = BackplaneEngine(configuration: configuration)
        let events = EventRecorder(engine.events())
        try await engine.start()
        return DownloadBench(server: server, origin: origin, engine: engine, events: events, dataDirectory: dataDirectory)
    }

    func stop() async {
        await engine.shutdown()
        await origin.stop()
        await server.stop()
    }

    /// Waits until the asset is completed or failed, and returns it.
    func waitForOutcome(_ assetId: String, timeout: Duration = .seconds(30), sourceLocation: SourceLocation = #_sourceLocation) async throws -> DownloadAsset {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let asset = try await engine.downloads.asset(assetId) {
                switch asset.state {
                case .completed, .failed: return asset
                default: break
                }
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let asset = try await engine.downloads.asset(assetId)
        Issue.record("\(assetId) neither completed nor failed within \(timeout): \(String(describing: asset?.state))", sourceLocation: sourceLocation)
        throw CancellationError()
    }

    /// Queues `show`, an HLS asset of `segments` slow files (the lowest video, English audio, no
    /// subtitles, 2 files at once if the bench was started so), and waits until more than
    /// `bytes` of it are down: a download to stop part-way.
    @discardableResult
    func startSlowShow(segments: Int, segmentBytes: Int, until bytes: Int64) async throws -> TestHLSAsset {
        let hls = TestHLSAsset(serving: origin, segments: segments, segmentBytes: segmentBytes)
        origin.inject(.delay(.milliseconds(30)), at: "/hls/low/segments.mp4")
        for index in 0..<segments { origin.inject(.delay(.milliseconds(30)), at: "/hls/audio/en/\(index).aac") }
        try await engine.downloads.enqueue(DownloadRequest(
            assetId: "show", url: origin.url("/hls/master.m3u8"), kind: .hls, maxVideoBitrate: 0, audioLanguages: ["en"],
            subtitleLanguages: []))
        try await wait("part of the download") {
            try await engine.downloads.asset("show").map { $0.bytesDownloaded > bytes } ?? false
        }
        return hls
    }

    /// Waits until `condition` holds.
    func wait(
        _ what: String, timeout: Duration = .seconds(30), sourceLocation: SourceLocation = #_sourceLocation,
        until condition: () async throws -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("\(what) did not happen within \(timeout)", sourceLocation: sourceLocation)
        throw CancellationError()
    }
}

/// What a local HLS download refers to: reads a playlist and every playlist it names, as a
/// player would, and lists each reference with the file it resolves to.
struct LocalPlaylistTree {
    /// Playlist path (relative to the asset directory) → the URIs it names, in order.
    var references: [String: [String]] = [:]

    init(index: URL) throws {
        let root = index.deletingLastPathComponent()
        var pending = [index.lastPathComponent]
        while let path = pending.popLast() {
            let text = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
            let base = (path as NSString).deletingLastPathComponent
            var uris: [String] = []
            for line in text.split(separator: "\n").map(String.init) {
                if line.hasPrefix("#") {
                    if let range = line.range(of: "URI=\"") {
                        let rest = line[range.upperBound...]
                        uris.append(String(rest.prefix { $0 != "\"" }))
                    }
                } else if !line.isEmpty {
                    uris.append(line)
                }
            }
            let resolved = uris.map { base.isEmpty ? $0 : "\(base)/\($0)" }
            references[path] = resolved
            pending += resolved.filter { $0.hasSuffix(".m3u8") }
        }
    }

    /// Every file referenced by any playlist.
    var allReferences: [String] { references.values.flatMap { $0 } }
}
