import Crypto
import Foundation

/// The HLS keys a download keeps (`AES-128`, `SAMPLE-AES` key files under `keys/`), sealed at
/// rest: AES-256-GCM under the device's storage key, bound to the asset and the file's path, so
/// that neither a copied data directory without the storage key nor a key file moved to another
/// asset opens. The download seals each key before its file takes its name
/// (`FileFetcher.finish`); the playback server opens it only to answer the player.
struct KeyVault: Sendable {
    private let key: SymmetricKey

    /// What a sealed file starts with; a key file without it was written before keys were sealed.
    static let magic = Data("BPK1".utf8)
    /// A sealed file's bytes beyond the key's: the magic, the nonce and the tag.
    static let sealBytes = Int64(magic.count + 12 + 16)

    init(key: SymmetricKey) {
        self.key = key
    }

    /// The storage key of the data directory (`storage-key`, owner-only), made on first use.
    /// Made only when there is no such file: one that cannot be read now (a locked device, an
    /// I/O error) must not be replaced, or every key sealed under it would be lost.
    static func inDirectory(_ directory: URL) throws -> KeyVault {
        let file = directory.appendingPathComponent("storage-key")
        if FileManager.default.fileExists(atPath: file.path) {
            let data = try Data(contentsOf: file)
            guard data.count == 32 else { throw CocoaError(.fileReadCorruptFile, userInfo: [NSFilePathErrorKey: file.path]) }
            return KeyVault(key: SymmetricKey(data: data))
        }
        let key = SymmetricKey(size: .bits256)
        try FileDeviceIdentityStore.writeOwnerOnly(key.withUnsafeBytes { Data($0) }, to: file)
        return KeyVault(key: key)
    }

    func seal(_ clear: Data, assetId: String, path: String) throws -> Data {
        guard let box = try AES.GCM.seal(clear, using: key, authenticating: Self.binding(assetId, path)).combined else {
            throw CocoaError(.coderInvalidValue)
        }
        return Self.magic + box
    }

    /// The key in the clear; a file without the magic as it is (written before keys were sealed).
    /// Throws when it does not open (another device's storage key, another asset's file).
    func open(_ stored: Data, assetId: String, path: String) throws -> Data {
        guard stored.starts(with: Self.magic) else { return stored }
        let box = try AES.GCM.SealedBox(combined: stored.dropFirst(Self.magic.count))
        return try AES.GCM.open(box, using: key, authenticating: Self.binding(assetId, path))
    }

    private static func binding(_ assetId: String, _ path: String) -> Data {
        Data("backplane key file v1\u{0}\(assetId)\u{0}\(path)".utf8)
    }
}
