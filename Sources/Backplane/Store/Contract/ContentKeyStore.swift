import Foundation
import BackplaneWire

/// The content keys of assets, each sealed under the operator's key-encryption key
/// (`KeyEncryptionKey`): the store never holds a key in the clear.
public protocol ContentKeyStore: Sendable {
    /// One transaction: `keys` become the asset's keys (`replacing`: those it had are removed;
    /// otherwise they are added to them), unless a key id among them belongs to another asset of
    /// the application, or the asset would hold more than `limit` keys. Nothing changes then.
    func setContentKeys(
        applicationId: String, assetId: String, keys: [ContentKeyRecord], replacing: Bool, limit: Int
    ) async throws -> ContentKeyChange
    /// The asset's keys, oldest first.
    func contentKeys(applicationId: String, assetId: String) async throws -> [ContentKeyRecord]
}

/// One key of one asset, sealed.
public struct ContentKeyRecord: Sendable, Equatable, Codable {
    public var applicationId: String
    public var assetId: String
    /// 32 lowercase hexadecimal digits.
    public var kid: String
    /// The key sealed with AES-256-GCM under the key-encryption key, bound to the application,
    /// the asset and the key id (so a row moved to another asset does not open).
    public var sealedKey: Data
    /// Which key-encryption key sealed it (`KeyEncryptionKey.fingerprint`): a server started
    /// with another one says so rather than failing to open it.
    public var sealedWith: String
    public var createdAt: Date
}

/// What `setContentKeys` did.
public enum ContentKeyChange: Sendable, Equatable {
    case set
    /// The key id opens another asset of the application.
    case kidTaken(kid: String, assetId: String)
    /// The asset would have more than the limit.
    case tooMany(held: Int)
}
