import Foundation
import Synchronization

/// What the playback server sends for a request: a file on disk, a playlist the download has
/// not written yet, a file still at its origin (played while it downloads), or a refusal.
enum PlaybackAnswer: Sendable, Equatable {
    case file(path: String, contentType: String)
    case text(String, contentType: String)
    /// Bytes read and opened for this answer (a sealed key).
    case bytes(Data, contentType: String)
    case origin(DownloadFile, contentType: String)
    case refused(status: Int, reason: String)
}

/// Where the playback server finds what a URL names, and the door it keeps.
protocol PlaybackLibrary: Sendable {
    /// What to send; a file served from disk or the plan counts as served (a play start).
    func answer(assetId: String, relativePath: String) async -> PlaybackAnswer
    /// An `.origin` answer's file is being passed on: the origin answered, so it counts as served.
    func servedFromOrigin(assetId: String, relativePath: String)
    /// A W3C ClearKey license request for the asset (`ClearKeyLicenseAnswer`), kept at the same
    /// door as its playlists.
    func clearKeyLicense(assetId: String, request body: Data) async -> PlaybackAnswer
}

/// The download the engine is running, as the playback server plays it before it completes.
protocol DownloadsInProgress: Sendable {
    /// The number of the running download of `assetId` (its plan stays the same while it does);
    /// nil when the engine is not downloading it.
    func downloadSession(of assetId: String) -> Int?
    /// The plan of the running download of `assetId`, once it is made.
    func planInProgress(assetId: String) -> DownloadPlan?
}

extension DownloadRunner: DownloadsInProgress {}

extension DownloadsInProgress {
    /// Whether a download of `assetId` runs, as the door and the plan lookup see it: from its
    /// permission until its record is an asset's (not `DownloadRunner.isDownloading`, which
    /// covers only its fetching).
    func runsDownload(of assetId: String) -> Bool { downloadSession(of: assetId) != nil }
}

/// The engine's downloads as the playback server sees them. Rights are checked at the door: for
/// an asset's top-level files (its playlists, or a flat asset's one file) and its keys, on every
/// request, on the trusted clock. Segments in a stream's folder pass once the playlist that
/// names them was served. The first playlist (or flat file) served in a play session counts as
/// the play start (`RightsKeeper.notePlaybackRequest`).
///
/// The asset the engine is downloading plays too: a file on disk is served from disk; the local
/// playlists, not written until the download ends, from its plan; any other file of the plan
/// is fetched from its origin as the player asks (`OriginPassThrough`), or answers 404 when the
/// origin cannot be reached.
struct DownloadedAssetsLibrary: PlaybackLibrary {
    let content: ContentStore
    let downloads: any DownloadsInProgress
    /// The asset's rights at the door: a completed asset's, or the downloading asset's.
    let rights: @Sendable (String) async throws -> AssetRights
    let refused: @Sendable (String, AssetRights) -> Void
    /// A file of the asset was served (`entry`: at the door): the first of a play session is its play start.
    let served: @Sendable (_ assetId: String, _ entry: Bool) -> Void
    /// The asset's keys for a player (`BackplaneLicenses.clearKeys`); nil without the built-in licenses.
    let clearKeys: (@Sendable (_ assetId: String, _ kids: [Data]) async throws -> [(kid: Data, key: Data)])?
    /// Whether the asset's keys come only through the license door (it holds a backplane license).
    let licensed: @Sendable (_ assetId: String) async -> Bool
    /// Opens the key files downloads sealed; nil serves them as they lie.
    let keyVault: KeyVault?
    /// The running download's plan by path, read once per download.
    private let plans = PlanIndexCache()

    init(
        content: ContentStore, downloads: any DownloadsInProgress, rights: @escaping @Sendable (String) async throws -> AssetRights,
        refused: @escaping @Sendable (String, AssetRights) -> Void, served: @escaping @Sendable (String, Bool) -> Void,
        clearKeys: (@Sendable (String, [Data]) async throws -> [(kid: Data, key: Data)])? = nil,
        licensed: @escaping @Sendable (String) async -> Bool = { _ in false }, keyVault: KeyVault? = nil
    ) {
        self.clearKeys = clearKeys
        self.licensed = licensed
        self.keyVault = keyVault
        self.content = content
        self.downloads = downloads
        self.rights = rights
        self.refused = refused
        self.served = served
    }

    func answer(assetId: String, relativePath: String) async -> PlaybackAnswer {
        let directory = content.directory(for: assetId).standardizedFileURL
        let file = directory.appendingPathComponent(relativePath).standardizedFileURL
        guard file.path.hasPrefix(directory.path + "/"), !relativePath.hasPrefix(AssetLayout.originalDirectory + "/"),
            !relativePath.hasSuffix(".partial"), !relativePath.hasSuffix(".partial-info")
        else { return .refused(status: 404, reason: "Not found.") }
        let entry = Self.isAtTheDoor(relativePath)
        let contentType = Self.contentType(of: relativePath)
        var answer: PlaybackAnswer
        if Self.isRegularFile(file) {
            answer = .file(path: file.path, contentType: contentType)
        } else if let plan = plans.index(of: assetId, in: downloads) {
            if let text = plan.written[relativePath] {
                answer = .text(text, contentType: contentType)
            } else if let remote = plan.files[relativePath] {
                answer = .origin(remote, contentType: contentType)
            } else {
                return .refused(status: 404, reason: "Not found.")
            }
        } else {
            return .refused(status: 404, reason: "Not found.")
        }
        if entry, let refusal = await refusalAtTheDoor(assetId) {
            // Media whose keys come only through the license door is useless without them: it
            // is served as it lies on disk, and the door refuses the license, so that an EME
            // player says why (`waitingforkey`, the 403's reason) rather than failing to load.
            guard case .file = answer, !AssetLayout.isKey(relativePath), await licensed(assetId) else { return refusal }
            return answer
        }
        // A key on disk is sealed: opened past the door, only to answer.
        if case .file(let path, _) = answer, AssetLayout.isKey(relativePath), let keyVault {
            guard let stored = try? Data(contentsOf: URL(fileURLWithPath: path)),
                let key = try? keyVault.open(stored, assetId: assetId, path: relativePath)
            else { return .refused(status: 403, reason: "The key does not open on this device.") }
            answer = .bytes(key, contentType: contentType)
        }
        // A file still at its origin counts once the origin answers (`servedFromOrigin`).
        if case .origin = answer { return answer }
        served(assetId, entry && !AssetLayout.isKey(relativePath))
        return answer
    }

    /// The door: nil while the asset's rights are valid, else the refusal (told to the app).
    private func refusalAtTheDoor(_ assetId: String) async -> PlaybackAnswer? {
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
        return nil
    }

    func servedFromOrigin(assetId: String, relativePath: String) {
        served(assetId, Self.isAtTheDoor(relativePath) && !AssetLayout.isKey(relativePath))
    }

    func clearKeyLicense(assetId: String, request body: Data) async -> PlaybackAnswer {
        guard let kids = ClearKeyLicenseAnswer.keyIds(in: body) else {
            return .refused(status: 400, reason: "Not a W3C ClearKey license request: {\"kids\":[1 to \(WireLimits.maxKeyIdsPerLicense) base64url key ids]}.")
        }
        if let refusal = await refusalAtTheDoor(assetId) { return refusal }
        guard let clearKeys, let keys = try? await clearKeys(assetId, kids), !keys.isEmpty else {
            return .refused(status: 404, reason: "The asset holds no license for these key ids.")
        }
        return .text(ClearKeyLicenseAnswer.license(keys), contentType: "application/json")
    }

    /// Top-level files (playlists, a flat asset's file) and keys.
    static func isAtTheDoor(_ relativePath: String) -> Bool {
        !relativePath.contains("/") || AssetLayout.isKey(relativePath)
    }

    private static func isRegularFile(_ url: URL) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) && !isDirectory.boolValue
    }

    static func contentType(of path: String) -> String {
        if AssetLayout.isKey(path) { return "application/octet-stream" }
        if path == SmoothPlan.indexManifest { return "application/vnd.ms-sstr+xml" }
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
        case "jpg", "jpeg": return "image/jpeg"
        case "png": return "image/png"
        case "webp": return "image/webp"
        case "json": return "application/json"
        default: return "application/octet-stream"
        }
    }
}

/// A running download's plan by path: what the local playlists say and where each file comes
/// from. Made once per download of an asset (a plan of thousands of segments is not decoded
/// again for each segment a player asks for).
struct PlanIndex: Sendable {
    var written: [String: String]
    var files: [String: DownloadFile]

    init(_ plan: DownloadPlan) {
        written = Dictionary(plan.written.map { ($0.path, $0.text) }, uniquingKeysWith: { first, _ in first })
        files = Dictionary(plan.files.map { ($0.relativePath, $0) }, uniquingKeysWith: { first, _ in first })
    }
}

/// The plan indexes of the downloads played while they run (one download runs at a time, so
/// this holds one or two).
final class PlanIndexCache: Sendable {
    private let cache = Mutex<[String: (session: Int, index: PlanIndex)]>([:])

    /// The index of `assetId`'s running download; nil when the engine is not downloading it or
    /// has not made its plan yet.
    func index(of assetId: String, in downloads: any DownloadsInProgress) -> PlanIndex? {
        guard let session = downloads.downloadSession(of: assetId) else { return nil }
        if let cached = cache.withLock({ $0[assetId] }), cached.session == session { return cached.index }
        guard let plan = downloads.planInProgress(assetId: assetId) else { return nil }
        let index = PlanIndex(plan)
        cache.withLock { cache in
            // Older downloads' indexes go: they are never asked for again.
            cache = cache.filter { downloads.downloadSession(of: $0.key) != nil }
            cache[assetId] = (session, index)
        }
        return index
    }
}
