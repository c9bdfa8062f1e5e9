import Foundation

/// A DASH manifest's `ContentProtection` element, as the license provider receives it
/// (`LicenseRequest.contentProtection`): what a Widevine or PlayReady license request is built
/// from. The local MPD keeps the elements as they were, for the player.
public struct ContentProtection: Sendable, Hashable, Codable {
    /// `schemeIdUri`: `urn:mpeg:dash:mp4protection:2011` for the common encryption scheme, or
    /// `urn:uuid:<system id>` for one DRM system (Widevine's is edef8ba9-79d6-4ace-a3c8-27dcd51d21ed).
    public var schemeIdUri: String
    /// `value`, e.g. `cenc` or `cbcs` for the common scheme.
    public var value: String?
    /// `cenc:default_KID`: the default key id, as the manifest writes it (a UUID).
    public var defaultKID: String?
    /// The `cenc:pssh` box, decoded from its base64 (nil when absent or not base64).
    public var pssh: Data?

    /// Elements given to the license provider for one asset, at most (each once); a real
    /// manifest names a handful, one per DRM system.
    static let maxPerAsset = 64

    public init(schemeIdUri: String, value: String? = nil, defaultKID: String? = nil, pssh: Data? = nil) {
        self.schemeIdUri = schemeIdUri
        self.value = value
        self.defaultKID = defaultKID
        self.pssh = pssh
    }

    /// `items` each once, in order, at most `maxPerAsset` of them: what the license provider gets.
    static func each(_ items: some Sequence<ContentProtection>) -> [ContentProtection] {
        var unique: [ContentProtection] = []
        var seen: Set<ContentProtection> = []
        for item in items where seen.insert(item).inserted {
            unique.append(item)
            if unique.count == maxPerAsset { break }
        }
        return unique
    }

    /// The system id of a `urn:uuid:` scheme, lowercase; nil for the common scheme.
    public var systemId: String? {
        let prefix = "urn:uuid:"
        guard schemeIdUri.lowercased().hasPrefix(prefix) else { return nil }
        return String(schemeIdUri.dropFirst(prefix.count)).lowercased()
    }
}

extension ContentProtection {
    /// From a `ContentProtection` element; the key id and the box under any namespace prefix.
    init(_ element: MPDElement) {
        self.init(
            schemeIdUri: element.attributes["schemeIdUri"] ?? "", value: element.attributes["value"],
            defaultKID: element.attribute(localName: "default_KID"),
            pssh: element.child("pssh").flatMap { Data(base64Encoded: $0.text, options: .ignoreUnknownCharacters) })
    }
}
