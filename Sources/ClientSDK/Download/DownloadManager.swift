import Foundation

/// The device's downloads: `engine.downloads`. Assets are downloaded in queue order, one at a
/// time, while the engine runs, the app's switch is on and the backplane has the device
/// download-enabled. The queue lives in the SDK database: it survives restarts and kills, and
/// what was downloading goes on from where it stopped.
///
/// ```swift
/// try await engine.downloads.enqueue(DownloadRequest(
///     assetId: "episode-7", url: URL(string: "https://cdn.example.com/e7/master.m3u8")!, kind: .hls,
///     maxVideoBitrate: 3_000_000, audioLanguages: ["en"], subtitleLanguages: []))
/// ```
public struct DownloadManager: Sendable {
    let engine: BackplaneEngine

    /// Queues an asset at `index` (nil: at the end). Throws `.invalidInput` for a request the
    /// SDK cannot download (empty id, a URL that is not http(s)) and `.download` when an HLS
    /// asset's playlists cannot be fetched or used (HTML, malformed, live); nothing is queued
    /// then. An asset already queued or downloaded is returned as it is; one that failed (its
    /// passes used up) has its retries cleared and is tried again, as `clearRetries` would.
    @discardableResult
    public func enqueue(_ request: DownloadRequest, at index: Int? = nil) async throws -> DownloadAsset {
        try await engine.downloadRunner().enqueue(request, at: index)
    }

    /// What `request` would take on the device, and whether it would fit at the end of the queue
    /// (`DownloadEstimate.shortfall`), without queueing it: its manifests are fetched, and the
    /// origin is asked the size of its first files. Throws `.invalidInput` for a request the SDK
    /// cannot download and `.download` when its manifests cannot be used or the origin does not
    /// answer.
    public func estimate(_ request: DownloadRequest) async throws -> DownloadEstimate {
        try await engine.downloadRunner().estimate(request)
    }

    /// Swaps the URL of a queued or partly downloaded asset (a signed URL that expired, a CDN
    /// switch), keeping what is on disk; the download under way goes on from the new URL. For
    /// HLS and DASH the new manifests must describe the same media: the same files for the chosen
    /// streams, whose URLs may differ only in host, port, scheme and query string. Otherwise, or
    /// when the new manifests cannot be fetched, the update is refused (`.download`, with the
    /// reason) and the old URL stays. Throws `.invalidInput` for an asset that is not queued.
    public func updateURL(assetId: String, url: URL) async throws {
        try await engine.downloadRunner().updateURL(assetId: assetId, url: url)
    }

    public func move(assetId: String, to index: Int) async throws {
        try await engine.downloadRunner().move(assetId, to: index)
    }

    /// Removes an asset: out of the queue (stopping it if it is downloading), or off the device
    /// if it is complete; its files are deleted either way. Throws `.invalidInput` for an
    /// asset the SDK does not hold.
    public func remove(assetId: String) async throws {
        let removal: AssetRemoval
        do {
            removal = try await engine.downloadRunner().remove(.assets([assetId]), reason: .user)
        } catch let error as BackplaneClientError {
            throw error
        } catch {
            throw BackplaneClientError(kind: .localStorage, message: "Could not delete the files of \(assetId).", underlying: error)
        }
        guard !removal.all.isEmpty else {
            throw BackplaneClientError(kind: .invalidInput, message: "Asset \(assetId) is neither queued nor downloaded.")
        }
    }

    /// Empties the queue (completed assets stay).
    public func flush() async throws {
        try await engine.downloadRunner().remove(.wholeQueue, reason: .user)
    }

    /// Pauses one asset, or the whole queue (nil); the asset downloading stops and keeps its
    /// partial files.
    public func pause(assetId: String? = nil) async throws {
        try await engine.downloadRunner().pause(assetId.map { [$0] })
    }

    public func resume(assetId: String? = nil) async throws {
        try await engine.downloadRunner().resume(assetId.map { [$0] })
    }

    /// Clears the error count of one asset, or of all (nil), so that failed assets are tried again.
    public func clearRetries(assetId: String? = nil) async throws {
        try await engine.downloadRunner().clearRetries(assetId.map { [$0] })
    }

    /// Caps what downloads take from the network, in bytes per second over every file in
    /// flight (at least 16 KiB/s), from now on, fetches already waiting included; nil lifts the
    /// cap. For the life of this engine: `DownloadOptions.maxBytesPerSecond` is where the next
    /// one starts. E.g. while the user streams, so that the stream keeps its bandwidth.
    public func setBandwidthLimit(bytesPerSecond: Int64?) async throws {
        try await engine.downloadRunner().downloader.fetcher.bandwidth?.bytesPerSecond = bytesPerSecond
    }

    /// The master switch, kept across restarts (on by default).
    public func setEnabled(_ enabled: Bool) async throws {
        try await engine.downloadRunner().setEnabled(enabled)
    }

    public func isEnabled() async throws -> Bool {
        try await engine.downloadRunner().isEnabled
    }

    /// The queue in order: everything not completed.
    public func queue() async throws -> [DownloadAsset] {
        try await engine.downloadRunner().queue()
    }

    /// A queued or completed asset.
    public func asset(_ assetId: String) async throws -> DownloadAsset? {
        try await engine.downloadRunner().asset(assetId)
    }

    /// The completed assets, oldest first.
    public func completed() async throws -> [DownloadAsset] {
        let root = try await engine.downloadRunner().content.root
        return try await engine.downloadedAssets().map { DownloadAsset(completed: $0, root: root) }
    }

    public func status() async throws -> DownloadEngineStatus {
        try await engine.downloadRunner().status
    }
}
