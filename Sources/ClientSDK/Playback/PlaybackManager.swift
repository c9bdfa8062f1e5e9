import Foundation
import BackplaneWire

/// Playing downloads: `engine.playback`. Hands out loopback URLs any player can play (AVPlayer,
/// ExoPlayer/Media3, a browser), served by the engine's `PlaybackServer`, which starts on first
/// use and stops with the engine. Rights are kept at the door: an asset's playlists (or a flat
/// asset's file) and keys are served only while `rights(for:)` is `valid` on the trusted clock;
/// otherwise the answer is 403 and the engine emits `playbackRefused`.
///
/// ```swift
/// let url = try await engine.playback.url(for: "episode-7")
/// player.play(url)
/// ```
public struct PlaybackManager: Sendable {
    let engine: BackplaneEngine

    /// The URL to give the player: the local master playlist of an HLS asset, the file of a flat
    /// one. A completed asset plays from disk; the asset the engine is downloading now plays
    /// while it downloads, once its plan is made (files not on disk yet are fetched from the
    /// origin as the player asks for them). Throws `invalidInput` for any other asset.
    public func url(for assetId: String) async throws -> URL {
        let server: PlaybackServer
        if let asset = try await engine.downloads.asset(assetId), asset.state == .completed, let local = asset.localURL {
            server = try await engine.playbackServer()
            let directory = try await engine.contentDirectory(for: assetId).standardizedFileURL.path
            let file = local.standardizedFileURL.path
            guard file.hasPrefix(directory + "/") else {
                throw BackplaneClientError(kind: .localStorage, message: "Asset '\(assetId)' has its file outside its directory.")
            }
            return server.url(assetId: assetId, relativePath: String(file.dropFirst(directory.count + 1)))
        }
        guard let plan = try await engine.planInProgress(assetId: assetId) else {
            throw BackplaneClientError(
                kind: .invalidInput, message: "Asset '\(assetId)' is neither downloaded nor downloading; only those are served.")
        }
        server = try await engine.playbackServer()
        return server.url(assetId: assetId, relativePath: plan.mainPath)
    }

    /// The URL of a completed asset's ancillary file (`AncillaryFile.tag`), for an image view or
    /// a web view: served without the rights check, as artwork is not the title. Throws
    /// `invalidInput` when the asset is not downloaded or has no such file on the device.
    public func url(for assetId: String, ancillary tag: String) async throws -> URL {
        guard let asset = try await engine.downloads.asset(assetId), asset.state == .completed,
              let file = asset.request.ancillaries.first(where: { $0.tag == tag }), asset.ancillaries.contains(where: { $0.tag == tag })
        else {
            throw BackplaneClientError(kind: .invalidInput, message: "Asset '\(assetId)' has no ancillary file '\(tag)' on the device.")
        }
        return try await engine.playbackServer().url(assetId: assetId, relativePath: file.relativePath)
    }

    /// Where an EME player (a web view) posts W3C ClearKey license requests for the asset's
    /// keys: beside its media on the playback server, answered only while its rights are
    /// `valid` (403 with the reason otherwise). The player's session is temporary; the license
    /// stays the SDK's. Throws `invalidInput` for an asset neither downloaded nor downloading.
    public func licenseURL(for assetId: String) async throws -> URL {
        let known = try await engine.downloads.asset(assetId) != nil
        let downloading = try await engine.planInProgress(assetId: assetId) != nil
        guard known || downloading else {
            throw BackplaneClientError(
                kind: .invalidInput, message: "Asset '\(assetId)' is neither downloaded nor downloading; only those are served.")
        }
        return try await engine.playbackServer().url(assetId: assetId, relativePath: ClearKeyLicenseAnswer.path)
    }

    /// The rights the server keeps at its door for the asset now: a completed asset's (as
    /// `engine.rights.rights(for:)` says), or, for the asset the engine is downloading, the
    /// rights it would have if it completed now. `noRights` for any other asset.
    public func rights(for assetId: String) async throws -> AssetRights {
        try await engine.playbackRights(assetId: assetId)
    }
}
