import Foundation

/// What the playback server sends for a request: a file and its type, or a refusal.
enum PlaybackAnswer: Sendable, Equatable {
    case file(path: String, contentType: String)
    case refused(status: Int, reason: String)
}

/// Where the playback server finds what a URL names, and the door it keeps.
protocol PlaybackLibrary: Sendable {
    func answer(assetId: String, relativePath: String) async -> PlaybackAnswer
}

/// The engine's downloads as the playback server sees them. Rights are checked at the door: for
/// an asset's top-level files (its playlists, or a flat asset's one file) and its keys, on every
/// request, on the trusted clock. Segments in a stream's folder pass once the playlist that
/// names them was served. The first playlist (or flat file) served in a play session counts as
/// the play start (`RightsKeeper.notePlaybackRequest`).
struct DownloadedAssetsLibrary: PlaybackLibrary {
    let content: ContentStore
    let rights: @Sendable (String) async throws -> AssetRights
    let refused: @Sendable (String, AssetRights) -> Void
    /// A file of the asset was served (`entry`: at the door): the first of a play session is its play start.
    let served: @Sendable (_ assetId: String, _ entry: Bool) -> Void

    func answer(assetId: String, relativePath: String) async -> PlaybackAnswer {
        let directory = content.directory(for: assetId).standardizedFileURL
        let file = directory.appendingPathComponent(relativePath).standardizedFileURL
        guard file.path.hasPrefix(directory.path + "/"), !relativePath.hasPrefix(AssetLayout.originalDirectory + "/"),
            Self.isRegularFile(file)
        else { return .refused(status: 404, reason: "Not found.") }
        let entry = Self.isAtTheDoor(relativePath)
        if entry {
            let now: AssetRights
            do {
                now = try await rights(assetId)
            } catch {
                return .refused(status: 503, reason: "The asset's rights cannot be read now.")
            }
            guard now.isPlayable else {
                refused(assetId, now)
                return .refused(status: 403, reason: "Not playable: \(now.name).")
            }
        }
        served(assetId, entry && !relativePath.hasPrefix("keys/"))
        return .file(path: file.path, contentType: Self.contentType(of: relativePath))
    }

    /// Top-level files (playlists, a flat asset's file) and keys.
    static func isAtTheDoor(_ relativePath: String) -> Bool {
        !relativePath.contains("/") || relativePath.hasPrefix("keys/")
    }

    private static func isRegularFile(_ url: URL) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) && !isDirectory.boolValue
    }

    static func contentType(of path: String) -> String {
        if path.hasPrefix("keys/") { return "application/octet-stream" }
        switch (path as NSString).pathExtension.lowercased() {
        case "m3u8": return "application/vnd.apple.mpegurl"
        case "mpd": return "application/dash+xml"
        case "ts": return "video/mp2t"
        case "m4s": return "video/iso.segment"
        case "mp4", "m4v": return "video/mp4"
        case "m4a": return "audio/mp4"
        case "aac": return "audio/aac"
        case "mp3": return "audio/mpeg"
        case "vtt", "webvtt": return "text/vtt"
        default: return "application/octet-stream"
        }
    }
}
