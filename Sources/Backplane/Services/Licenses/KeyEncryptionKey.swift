import Crypto
import Foundation
import BackplaneWire

/// The operator's key that seals content keys at rest: the database (and every backup of it)
/// holds content keys only sealed under it, so a stolen database opens no video without it.
///
/// It comes from `--key-encryption-key-file` (64 hexadecimal digits). An embedded (SQLite)
/// backplane started without one makes its own in the data directory on first start
/// (`inDataDirectory`), owner-only; a PostgreSQL backplane, whose nodes must share one, never
/// makes one. Each key is sealed with AES-256-GCM and bound to its application, asset and key id.
public struct KeyEncryptionKey: Sendable {
    private let key: SymmetricKey
    /// Names the key without revealing it (the first 8 bytes of a hash of it, hex), stored with
    /// each sealed key so that a server started with another key says which one is missing.
    public let fingerprint: String

    /// The name of the file an embedded backplane keeps its own key in.
    public static let fileName = "key-encryption-key"

    /// 32 bytes.
    public init(bytes: Data) throws {
        guard bytes.count == 32 else { throw KeyEncryptionKeyError("A key-encryption key is 32 bytes; this one is \(bytes.count).") }
        key = SymmetricKey(data: bytes)
        fingerprint = HexKey.text(SHA256.hash(data: Data("backplane key-encryption key\n".utf8) + bytes).prefix(8))
    }

    /// A file holding the key as 64 hexadecimal digits (whitespace around them is ignored), as
    /// `openssl rand -hex 32` writes it.
    public init(contentsOf file: URL) throws {
        let text: String
        do { text = try String(contentsOf: file, encoding: .utf8) } catch {
            throw KeyEncryptionKeyError("The key-encryption key file \(file.path) cannot be read: \(error.localizedDescription)")
        }
        let digits = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard digits.utf8.count == 64, let bytes = RequestSigning.unhex(digits) else {
            throw KeyEncryptionKeyError(
                "The key-encryption key file \(file.path) must hold 64 hexadecimal digits (make one with: openssl rand -hex 32).")
        }
        try self.init(bytes: bytes)
    }

    /// A new random key.
    public static func generate() -> KeyEncryptionKey {
        // 32 random bytes cannot fail the length check.
        try! KeyEncryptionKey(bytes: SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) })
    }

    /// The data directory's own key, made (owner-only, written through to disk before any key
    /// is sealed under it) when there is none. `created` tells the caller to say so.
    public static func inDataDirectory(_ directory: URL) throws -> (key: KeyEncryptionKey, created: Bool) {
        let file = directory.appendingPathComponent(fileName)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let made = generate()
        // O_EXCL: of two processes starting at once, one writes and the other reads its key.
        let descriptor = open(file.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        if descriptor < 0 {
            guard errno == EEXIST else {
                throw KeyEncryptionKeyError("Cannot create \(file.path): \(String(cString: strerror(errno))).")
            }
            return (try KeyEncryptionKey(contentsOf: file), false)
        }
        let written = made.key.withUnsafeBytes { Data(HexKey.text($0).utf8) } + Data("\n".utf8)
        let complete = written.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) } == written.count && fsync(descriptor) == 0
        close(descriptor)
        guard complete, syncDirectory(directory) else {
            try? FileManager.default.removeItem(at: file)
            throw KeyEncryptionKeyError("Cannot write \(file.path): \(String(cString: strerror(errno))).")
        }
        return (made, true)
    }

    /// A new file's name reaches the disk only with its directory's.
    private static func syncDirectory(_ directory: URL) -> Bool {
        let descriptor = open(directory.path, O_RDONLY)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        return fsync(descriptor) == 0
    }

    /// Seals `contentKey` for one asset's key id.
    func seal(_ contentKey: Data, applicationId: String, assetId: String, kid: String) throws -> Data {
        guard let sealed = try AES.GCM.seal(
            contentKey, using: key, authenticating: Self.binding(applicationId: applicationId, assetId: assetId, kid: kid)).combined
        else { throw KeyEncryptionKeyError("AES-GCM gave no combined box.") }  // only for nonces other than 12 bytes
        return sealed
    }

    /// Opens a stored key; throws when it was sealed under another key-encryption key, or was
    /// changed or moved to another asset in the database.
    func unseal(_ record: ContentKeyRecord) throws -> Data {
        guard record.sealedWith == fingerprint else {
            throw KeyEncryptionKeyError(
                "Content key \(record.kid) of asset '\(record.assetId)' was sealed under key-encryption key \(record.sealedWith), "
                    + "but this backplane has \(fingerprint): start it with the key it was sealed under.")
        }
        do {
            return try AES.GCM.open(
                AES.GCM.SealedBox(combined: record.sealedKey), using: key,
                authenticating: Self.binding(applicationId: record.applicationId, assetId: record.assetId, kid: record.kid))
        } catch {
            throw KeyEncryptionKeyError("Content key \(record.kid) of asset '\(record.assetId)' does not open: it was changed in the database.")
        }
    }

    private static func binding(applicationId: String, assetId: String, kid: String) -> Data {
        Data("backplane content key\n\(applicationId)\n\(assetId)\n\(kid)".utf8)
    }
}

/// A key-encryption key that is missing, unreadable or not the one a key was sealed under.
public struct KeyEncryptionKeyError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
