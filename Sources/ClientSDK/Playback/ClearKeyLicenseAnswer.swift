import Foundation
import BackplaneWire

/// The playback server's W3C ClearKey license answers: an EME player (a web view) posts the
/// request its CDM made, `{"kids":["<base64url>"],"type":"temporary"}`, to
/// `engine.playback.licenseURL(for:)`, and gets the asset's keys in the clear, only while the
/// asset's rights at the door are `valid`. The player's session is temporary; the license it
/// came from is the SDK's, kept wrapped on disk.
enum ClearKeyLicenseAnswer {
    /// The path under an asset, beside its media: no file of an asset is named so (the SDK names them).
    static let path = "clearkey-license"
    /// A request holds at most `maxKeyIdsPerLicense` key ids: far less than this.
    static let maxRequestBytes = 4096

    /// Key ids from a W3C ClearKey license request (16 bytes each, at most
    /// `WireLimits.maxKeyIdsPerLicense`); nil for anything else.
    static func keyIds(in body: Data) -> [Data]? {
        guard body.count <= maxRequestBytes, let request = try? JSONDecoder().decode(ClearKeyRequest.self, from: body) else { return nil }
        return try? request.keyIds()
    }

    /// The W3C ClearKey license for `keys`.
    static func license(_ keys: [(kid: Data, key: Data)]) -> String {
        struct Key: Encodable { var kty = "oct", kid: String, k: String }
        struct License: Encodable { var keys: [Key], type = "temporary" }
        let license = License(keys: keys.map { Key(kid: Base64URL.encode($0.kid), k: Base64URL.encode($0.key)) })
        return String(decoding: (try? JSONEncoder().encode(license)) ?? Data("{}".utf8), as: UTF8.self)
    }
}
