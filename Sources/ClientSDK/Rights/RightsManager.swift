import Foundation
import BackplaneWire

/// Whether downloaded assets may be played: `engine.rights`. An asset's window comes from the
/// application's settings, the backplane's grant and the asset's own availability (see
/// `DownloadRequest.availability`); it is judged on a trusted clock that setting the device's
/// clock cannot move. Expired assets are deleted by the SDK.
///
/// ```swift
/// if try await engine.rights.recordPlayStart(assetId: "episode-7").isPlayable {
///     player.play(url)
/// }
/// ```
public struct RightsManager: Sendable {
    let engine: BackplaneEngine

    /// The asset's rights now; `noRights` when it is not on the device.
    public func rights(for assetId: String) async throws -> AssetRights {
        try await engine.rightsKeeper().rights(assetId: assetId)
    }

    /// Call when playback starts. Returns the rights: when they are not `valid`, nothing is
    /// recorded and the app should not play. The first play starts the expiry after play;
    /// each logs `playStart`.
    @discardableResult
    public func recordPlayStart(assetId: String) async throws -> AssetRights {
        try await engine.rightsKeeper().recordPlayStart(assetId: assetId)
    }

    /// Call when playback stops; logs `playStop` with the seconds watched, if given.
    public func recordPlayStop(assetId: String, watchedSeconds: TimeInterval? = nil) async throws {
        try await engine.rightsKeeper().recordPlayStop(assetId: assetId, watched: watchedSeconds)
    }

    /// The completed assets that may be played now, oldest first.
    public func playable() async throws -> [DownloadAsset] {
        let keeper = try await engine.rightsKeeper()
        let playable = Set(try keeper.allRights().filter { $0.1.isPlayable }.map(\.0.assetId))
        return try await engine.downloads.completed().filter { playable.contains($0.assetId) }
    }

    /// The time rights are judged on, or why there is none.
    public func trustedTime() async throws -> TrustedTime {
        try await engine.rightsKeeper().now()
    }

    /// Deletes expired assets now (the SDK also does it by itself while it runs).
    public func sweepExpired() async throws {
        _ = try await engine.rightsKeeper().sweep()
    }
}
