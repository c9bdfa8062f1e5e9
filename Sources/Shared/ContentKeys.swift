import Foundation

// Content keys: the AES-128 keys an application's packager encrypted an asset with, registered
// with the backplane so that it can answer license requests for the asset. Keys go in once and
// never come out of the admin API: a list shows key ids only, and a generated key is shown in
// the answer that made it, for the packager, and never again.

/// `PUT /v1/admin/assets/{assetId}/keys`: the asset's keys, replacing those it had.
public struct ContentKeysRequest: Codable, Sendable, Equatable {
    public var keys: [ContentKeyInput]

    public init(keys: [ContentKeyInput]) {
        self.keys = keys
    }
}

/// One key as a packager writes it (Shaka Packager's `--keys key_id=…:key=…`).
public struct ContentKeyInput: Codable, Sendable, Equatable {
    /// The key id: 32 hexadecimal digits (16 bytes), as in the MPD's `cenc:default_KID` without
    /// its dashes. Unique within an application: one key id opens one asset.
    public var kid: String
    /// The AES-128 key: 32 hexadecimal digits.
    public var key: String

    public init(kid: String, key: String) {
        self.kid = kid
        self.key = key
    }
}

/// A registered key, without the key: what `GET /v1/admin/assets/{assetId}/keys` lists.
public struct ContentKeyId: Codable, Sendable, Equatable {
    /// 32 lowercase hexadecimal digits.
    public var kid: String
    public var createdAt: Date

    public init(kid: String, createdAt: Date) {
        self.kid = kid
        self.createdAt = createdAt
    }
}

/// An asset's key ids, oldest first.
public struct ContentKeyList: Codable, Sendable, Equatable {
    public var assetId: String
    public var keys: [ContentKeyId]

    public init(assetId: String, keys: [ContentKeyId]) {
        self.assetId = assetId
        self.keys = keys
    }
}

/// `POST /v1/admin/assets/{assetId}/keys`: a key the backplane made and added to the asset's.
/// This answer is the only place the key is ever shown.
public struct GeneratedContentKey: Codable, Sendable, Equatable {
    public var assetId: String
    /// 32 lowercase hexadecimal digits.
    public var kid: String
    /// 32 lowercase hexadecimal digits: give it to the packager now, it is not shown again.
    public var key: String
    public var createdAt: Date

    public init(assetId: String, kid: String, key: String, createdAt: Date) {
        self.assetId = assetId
        self.kid = kid
        self.key = key
        self.createdAt = createdAt
    }
}

extension WireLimits {
    /// Keys one asset may have (one per track type and period is the common case).
    public static let maxContentKeysPerAsset = 16
}

/// Key ids and keys as 16 bytes written in 32 hexadecimal digits.
public enum HexKey {
    /// The 16 bytes of 32 hexadecimal digits (either case); nil for anything else.
    public static func bytes(_ text: String) -> Data? {
        guard text.utf8.count == 32 else { return nil }
        return RequestSigning.unhex(text)
    }

    /// Lowercase hexadecimal.
    public static func text(_ bytes: some Sequence<UInt8>) -> String { RequestSigning.hex(bytes) }
}
