import Foundation
import BackplaneWire

// The engine's side of playing downloads: the playback server, started on first use with the
// door it keeps (rights, play starts, ClearKey keys), and what `engine.playback` asks of it.
extension BackplaneEngine {
    /// The playback server, started once; joined by every caller meanwhile.
    func playbackServer() async throws -> PlaybackServer {
        guard state != .shutDown else {
            throw BackplaneClientError(kind: .notRunning, message: "The engine was shut down; create a new one.")
        }
        if let playbackStart { return try await playbackStart.value }
        let parts = try loadComponents()
        let broadcaster = broadcaster
        let keeper = parts.rights, downloads = parts.downloads
        let library = DownloadedAssetsLibrary(
            content: parts.content, downloads: downloads,
            rights: { assetId in try keeper.playbackRights(assetId: assetId, downloading: downloads.runsDownload(of: assetId)) },
            refused: { assetId, rights in broadcaster.emit(.playbackRefused(assetId: assetId, rights: rights)) },
            served: { assetId, entry in
                try? keeper.notePlaybackRequest(assetId: assetId, entry: entry, downloading: downloads.runsDownload(of: assetId))
            },
            clearKeys: { [licenses = parts.licenses] assetId, kids in try await licenses.clearKeys(assetId: assetId, kids: kids) },
            licensed: { [licenses = parts.licenses] assetId in await licenses.holdsLicense(assetId: assetId) },
            keyVault: parts.keyVault)
        let options = configuration.playback
        // The origins the downloads trust: a title played while it downloads comes from them too.
        let originClient = try DownloadClients.client(trusting: configuration.downloads.originCertificateAuthorities)
        let task = Task {
            try await PlaybackServer.start(library: library, origins: OriginPassThrough(client: originClient), options: options)
        }
        playbackStart = task
        do {
            return try await task.value
        } catch {
            playbackStart = nil
            throw BackplaneClientError(kind: .localStorage, message: "The playback server could not start.", underlying: error)
        }
    }

    /// The rights the playback server keeps at its door for `assetId` now.
    func playbackRights(assetId: String) throws -> AssetRights {
        let parts = try loadComponents()
        return try rightsKeeper().playbackRights(assetId: assetId, downloading: parts.downloads.runsDownload(of: assetId))
    }

    /// The plan of the asset the engine is downloading now (nil for any other).
    func planInProgress(assetId: String) throws -> DownloadPlan? {
        try loadComponents().downloads.planInProgress(assetId: assetId)
    }
}
