import Foundation
import BackplaneWire

/// The built-in license provider (the default): ClearKey content's licenses through the
/// backplane, acquired before the download, renewed before they end, released when the asset
/// is deleted. The engine puts its own `BackplaneLicenses` in this value's place, which holds
/// the device's signed session; content that names another DRM system only (Widevine,
/// PlayReady, FairPlay) is left to the app (`.notRequired` here).
public struct BackplaneLicenseProvider: LicenseProvider {
    public init() {}

    // Reached only outside an engine: inside one, `BackplaneLicenses` answers.
    public func acquireLicense(for asset: LicenseRequest) async throws -> LicenseState {
        guard ClearKeyContent.keyIds(of: asset).isEmpty else { throw Self.outsideAnEngine }
        return .notRequired
    }

    public func renewLicense(for asset: LicenseRequest) async throws -> Date? { throw Self.outsideAnEngine }

    public func releaseLicense(assetId: String) async {}

    private static var outsideAnEngine: BackplaneClientError {
        BackplaneClientError(kind: .notRunning, message: "BackplaneLicenseProvider works inside a BackplaneEngine only.")
    }
}

/// What makes content ClearKey's: key ids, and no DRM system named but the common one or
/// ClearKey's. Content protected for other systems only is the app's own provider's.
enum ClearKeyContent {
    /// `urn:uuid:` system ids of W3C Common PSSH and of ClearKey.
    static let systemIds: Set<String> = ["1077efec-c0b2-4d02-ace3-3c1e52e2fb4b", "e2719d58-a985-b3c9-781a-b030af78d30e"]

    /// The asset's key ids (16 bytes each, in the order met, without repeats), or none when it
    /// is not ClearKey content.
    static func keyIds(of asset: LicenseRequest) -> [Data] {
        let named = asset.contentProtection.compactMap(\.systemId)
        guard named.isEmpty || named.contains(where: systemIds.contains) else { return [] }
        var kids: [Data] = []
        for kid in asset.keyIds + asset.contentProtection.compactMap({ $0.defaultKID.flatMap(keyId(uuid:)) }) where !kids.contains(kid) {
            kids.append(kid)
        }
        return kids
    }

    /// `cenc:default_KID` as MPDs write it (a UUID, dashes optional): its 16 bytes.
    static func keyId(uuid: String) -> Data? {
        let hex = uuid.replacingOccurrences(of: "-", with: "")
        return hex.utf8.count == 32 ? HexKey.bytes(hex) : nil
    }
}
