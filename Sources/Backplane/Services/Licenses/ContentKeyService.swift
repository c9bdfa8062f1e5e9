import Crypto
import Foundation
import BackplaneWire

/// Assets' content keys, as admins register them: set by a packager's keys, or made here and
/// shown once. Keys are sealed under the key-encryption key before they reach the store, and no
/// answer of this service ever carries a stored key: only the one it just generated.
public struct ContentKeyService: Sendable {
    let store: any BackplaneStore
    /// Nil when the operator configured none (a PostgreSQL backplane without
    /// `--key-encryption-key-file`): keys can then be neither set nor opened.
    let sealing: KeyEncryptionKey?
    let now: @Sendable () -> Date

    public init(store: any BackplaneStore, sealing: KeyEncryptionKey?, now: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.sealing = sealing
        self.now = now
    }

    /// The asset's keys become `request.keys` (0 removes them all). 400 for a key id or key that
    /// is not 32 hexadecimal digits, a key id twice, or more than `maxContentKeysPerAsset`; 409
    /// when a key id already opens another asset of the application. Nothing is stored then.
    public func set(applicationId: String, assetId: String, _ request: ContentKeysRequest) async throws -> ContentKeyList {
        try Validate.identifier(assetId, field: "assetId")
        let limit = WireLimits.maxContentKeysPerAsset
        guard request.keys.count <= limit else {
            throw ServiceError.validation("An asset has at most \(limit) keys; \(request.keys.count) were given.", field: "keys")
        }
        var seen = Set<String>()
        var parsed: [(kid: String, key: Data)] = []
        for (index, input) in request.keys.enumerated() {
            guard let kid = HexKey.bytes(input.kid).map(HexKey.text) else {
                throw ServiceError.validation("'keys[\(index)].kid' must be 32 hexadecimal digits.", field: "keys[\(index)].kid")
            }
            guard let key = HexKey.bytes(input.key) else {
                throw ServiceError.validation("'keys[\(index)].key' must be 32 hexadecimal digits.", field: "keys[\(index)].key")
            }
            guard seen.insert(kid).inserted else {
                throw ServiceError.validation("Key id \(kid) is given twice.", field: "keys[\(index)].kid")
            }
            parsed.append((kid, key))
        }
        let records = try parsed.map { try seal($0.key, applicationId: applicationId, assetId: assetId, kid: $0.kid) }
        try await store(records, applicationId: applicationId, assetId: assetId, replacing: true)
        return try await list(applicationId: applicationId, assetId: assetId)
    }

    /// Makes a random key id and key, adds them to the asset's keys and returns both: the only
    /// time the key is shown. 400 when the asset has `maxContentKeysPerAsset` keys already.
    public func generate(applicationId: String, assetId: String) async throws -> GeneratedContentKey {
        try Validate.identifier(assetId, field: "assetId")
        let kid = HexKey.text(SymmetricKey(size: .bits128).withUnsafeBytes { Data($0) })
        let key = SymmetricKey(size: .bits128).withUnsafeBytes { Data($0) }
        let record = try seal(key, applicationId: applicationId, assetId: assetId, kid: kid)
        try await store([record], applicationId: applicationId, assetId: assetId, replacing: false)
        return GeneratedContentKey(assetId: assetId, kid: kid, key: HexKey.text(key), createdAt: record.createdAt)
    }

    /// The asset's key ids (empty when it has none), never the keys.
    public func list(applicationId: String, assetId: String) async throws -> ContentKeyList {
        try Validate.identifier(assetId, field: "assetId")
        let records = try await store.contentKeys(applicationId: applicationId, assetId: assetId)
        return ContentKeyList(assetId: assetId, keys: records.map { ContentKeyId(kid: $0.kid, createdAt: $0.createdAt) })
    }

    private func seal(_ key: Data, applicationId: String, assetId: String, kid: String) throws -> ContentKeyRecord {
        let sealing = try keyEncryptionKey()
        return ContentKeyRecord(
            applicationId: applicationId, assetId: assetId, kid: kid,
            sealedKey: try sealing.seal(key, applicationId: applicationId, assetId: assetId, kid: kid), sealedWith: sealing.fingerprint,
            createdAt: now())
    }

    private func store(_ records: [ContentKeyRecord], applicationId: String, assetId: String, replacing: Bool) async throws {
        let limit = WireLimits.maxContentKeysPerAsset
        switch try await store.setContentKeys(
            applicationId: applicationId, assetId: assetId, keys: records, replacing: replacing, limit: limit)
        {
        case .set: return
        case .kidTaken(let kid, let owner):
            throw ServiceError(
                .conflict, "Key id \(kid) already opens asset '\(owner)'; a key id opens one asset.",
                details: ["kid": .string(kid), "assetId": .string(owner)])
        case .tooMany(let held):
            throw ServiceError.validation("Asset '\(assetId)' has \(held) keys; an asset has at most \(limit).", field: "keys")
        }
    }

    func keyEncryptionKey() throws -> KeyEncryptionKey {
        guard let sealing else {
            throw ServiceError(
                .serviceUnavailable,
                "This backplane has no key-encryption key, so it cannot keep content keys: start it with --key-encryption-key-file.")
        }
        return sealing
    }
}
