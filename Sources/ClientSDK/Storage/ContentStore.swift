import Crypto
import Foundation
import BackplaneWire

/// Downloaded content on the device: files under `<dataDirectory>/content` and their records in
/// the SDK's database. The download engine writes here, and every asset that leaves the device
/// leaves through here (`removeDownloaded`, `removeDequeued`), with the same events whatever
/// the reason.
struct ContentStore: Sendable {
    let root: URL
    let database: SDKDatabase
    /// Told of every deleted asset that held a license.
    let licenses: (any LicenseProvider)?
    /// Where each removal is logged (uploaded) and announced (in-app).
    let events: EngineEvents
    /// The download loop's: a removal may free the room or the asset count it waits for.
    let downloadSignal: WakeSignal
    /// Sends the releases a deletion queued of the backplane's licenses (`BackplaneLicenses`).
    let sendLicenseReleases: @Sendable () async -> Void

    init(
        dataDirectory: URL, database: SDKDatabase, licenses: (any LicenseProvider)?, events: EngineEvents, downloadSignal: WakeSignal,
        sendLicenseReleases: @escaping @Sendable () async -> Void = {}
    ) {
        self.root = dataDirectory.appendingPathComponent("content", isDirectory: true)
        self.database = database
        self.licenses = licenses
        self.sendLicenseReleases = sendLicenseReleases
        self.events = events
        self.downloadSignal = downloadSignal
    }

    /// Copies `file` in as the content of `assetId`, replacing what the asset had.
    func add(assetId: String, copying file: URL) throws -> LocalAsset {
        let directory = root.appendingPathComponent(Self.directoryName(for: assetId), isDirectory: true)
        let fileManager = FileManager.default
        if fileManager.fileExists(atPath: directory.path) { try fileManager.removeItem(at: directory) }
        try fileManager.createDirectory(at: directory, withIntermediateDirectories: true)
        let destination = directory.appendingPathComponent(file.lastPathComponent)
        try fileManager.copyItem(at: file, to: destination)
        let size = (try fileManager.attributesOfItem(atPath: destination.path)[.size] as? NSNumber)?.int64Value ?? 0
        let asset = LocalAsset(
            assetId: assetId, relativePath: "\(Self.directoryName(for: assetId))/\(file.lastPathComponent)", size: size, addedAt: Date())
        try database.insertAsset(asset)
        return asset
    }

    /// The one way a downloaded asset leaves the device, whatever the reason: its files and
    /// record deleted (all assets when nil, stray files in the content directory too), its
    /// license released, one event logged (`assetDeleted` with `reason`) and one announced
    /// (`downloadRemoved`) for each, and the download loop woken. Returns the ids that existed.
    /// Synchronous, so that a caller that judged the assets (the expiry sweep) deletes them with
    /// no suspension in between. Queued assets leave through `DownloadRunner.remove`, which
    /// stops their download and comes here for both kinds.
    @discardableResult
    func removeDownloaded(_ assetIds: [String]?, reason: AssetDeletionReason) throws -> [String] {
        let deleted = try delete(assetIds)
        for assetId in deleted {
            events.record(.assetDeleted(assetId: assetId, reason: reason), tellingApp: .downloadRemoved(assetId: assetId, reason: reason))
        }
        if !deleted.isEmpty { downloadSignal.signal() }
        return deleted
    }

    /// The queued assets `DownloadRunner.remove` took out of the queue (their download stopped):
    /// their files deleted, the licenses of those in `licensed` released, one event logged
    /// (`removedFromQueue`) and one announced (`downloadRemoved`) for each.
    func removeDequeued(_ assetIds: [String], licensed: Set<String>, reason: AssetDeletionReason) {
        release(assetIds.filter(licensed.contains))
        for assetId in assetIds {
            try? removeFiles(of: assetId)
            events.record(.removedFromQueue(assetId: assetId), tellingApp: .downloadRemoved(assetId: assetId, reason: reason))
        }
        if !assetIds.isEmpty { downloadSignal.signal() }
    }

    /// Deletes the listed assets' files, then their records; returns the ids that existed.
    /// Deleting everything (`nil`) also clears stray files from the content directory.
    /// Safe to run again after a crash part-way: what is gone stays gone.
    private func delete(_ assetIds: [String]?) throws -> [String] {
        let fileManager = FileManager.default
        let existing = try database.assets().filter { asset in assetIds.map { $0.contains(asset.assetId) } ?? true }
        for asset in existing {
            let directory = root.appendingPathComponent(Self.directoryName(for: asset.assetId), isDirectory: true)
            if fileManager.fileExists(atPath: directory.path) { try fileManager.removeItem(at: directory) }
        }
        if assetIds == nil, fileManager.fileExists(atPath: root.path) {
            for item in try fileManager.contentsOfDirectory(at: root, includingPropertiesForKeys: nil) {
                try fileManager.removeItem(at: item)
            }
        }
        let licensed = try database.assetIdsHoldingLicense(queued: false)
        let deleted = try database.deleteAssets(assetIds).map(\.assetId)
        release(deleted.filter(licensed.contains))
        return deleted
    }

    /// Hands the licenses of deleted assets back to the app's provider, off the caller's path;
    /// sends the releases of the backplane's licenses, which the deletion queued.
    func release(_ assetIds: [String]) {
        let provider = assetIds.isEmpty ? nil : licenses
        Task {
            if let provider { for assetId in assetIds { await provider.releaseLicense(assetId: assetId) } }
            await sendLicenseReleases()
        }
    }

    /// A new directory's path for manifests fetched and dropped again (an estimate, a new URL
    /// checked before it is taken): beside `content/`, never mistaken for an asset's.
    func scratchDirectory() -> URL {
        root.deletingLastPathComponent().appendingPathComponent("scratch", isDirectory: true)
            .appendingPathComponent(UUID().uuidString, isDirectory: true)
    }

    /// Where an asset's files go, whether it is downloading or complete.
    func directory(for assetId: String) -> URL {
        root.appendingPathComponent(Self.directoryName(for: assetId), isDirectory: true)
    }

    /// Deletes the files of an asset that has no record (a queued download).
    func removeFiles(of assetId: String) throws {
        let directory = directory(for: assetId)
        if FileManager.default.fileExists(atPath: directory.path) { try FileManager.default.removeItem(at: directory) }
    }

    func url(of asset: LocalAsset) -> URL {
        root.appendingPathComponent(asset.relativePath)
    }

    /// Asset ids are the CMS's: any string of up to 128 bytes. One directory each, with a name
    /// safe on every file system (at most 255 bytes): an id of up to `plainIdBytes` bytes in
    /// hex, as it always was; a longer one as the hex of its first 48 bytes, `-`, and the SHA-256
    /// of the whole id, so that ids sharing a long prefix (URLs used as ids) never share files.
    /// The plain form is hex only, so the two forms cannot meet.
    static func directoryName(for assetId: String) -> String {
        let bytes = Array(assetId.utf8)
        guard bytes.count > plainIdBytes else { return RequestSigning.hex(bytes) }
        return RequestSigning.hex(Array(bytes.prefix(48))) + "-" + RequestSigning.hex(Array(SHA256.hash(data: bytes)))
    }

    /// The longest id named by its own hex.
    static let plainIdBytes = 100

    /// The name an id longer than `plainIdBytes` had under the first rule: the hex of its first 100 bytes,
    /// which two such ids could share.
    static func truncatedDirectoryName(for assetId: String) -> String? {
        let bytes = Array(assetId.utf8)
        return bytes.count > plainIdBytes ? RequestSigning.hex(Array(bytes.prefix(plainIdBytes))) : nil
    }
}
