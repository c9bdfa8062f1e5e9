import Foundation
import BackplaneWire

/// Downloaded content on the device: files under `<dataDirectory>/content` and their records in
/// the SDK's database. The download engine writes here; remote wipe and delete remove from here.
struct ContentStore: Sendable {
    let root: URL
    let local: LocalStore
    /// Told of every deleted asset that held a license.
    let licenses: (any LicenseProvider)?

    init(dataDirectory: URL, local: LocalStore, licenses: (any LicenseProvider)? = nil) {
        self.root = dataDirectory.appendingPathComponent("content", isDirectory: true)
        self.local = local
        self.licenses = licenses
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
        try local.insertAsset(asset)
        return asset
    }

    /// Deletes the listed assets' files, then their records; returns the ids that existed.
    /// Deleting everything (`nil`) also clears stray files from the content directory.
    /// Safe to run again after a crash part-way: what is gone stays gone.
    func delete(_ assetIds: [String]?) throws -> [String] {
        let fileManager = FileManager.default
        let existing = try local.assets().filter { asset in assetIds.map { $0.contains(asset.assetId) } ?? true }
        for asset in existing {
            let directory = root.appendingPathComponent(Self.directoryName(for: asset.assetId), isDirectory: true)
            if fileManager.fileExists(atPath: directory.path) { try fileManager.removeItem(at: directory) }
        }
        if assetIds == nil, fileManager.fileExists(atPath: root.path) {
            for item in try fileManager.contentsOfDirectory(at: root, includingPropertiesForKeys: nil) {
                try fileManager.removeItem(at: item)
            }
        }
        let licensed = try local.assetIdsHoldingLicense(queued: false)
        let deleted = try local.deleteAssets(assetIds).map(\.assetId)
        release(deleted.filter(licensed.contains))
        return deleted
    }

    /// Hands the licenses of deleted assets back to the app's provider, off the caller's path.
    func release(_ assetIds: [String]) {
        guard let licenses, !assetIds.isEmpty else { return }
        Task { for assetId in assetIds { await licenses.releaseLicense(assetId: assetId) } }
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

    /// Asset ids are the CMS's: any string. One directory each, with a name safe on every file system.
    static func directoryName(for assetId: String) -> String {
        RequestSigning.hex(Array(assetId.utf8)).prefix(200).description
    }
}
