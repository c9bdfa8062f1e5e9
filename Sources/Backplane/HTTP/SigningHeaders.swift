import HTTPTypes

/// The signing headers of a request, found in one pass over its fields. `HTTPFields`' subscript
/// searches the fields for its name and joins what it finds through generic sequence code, and a
/// signed request needs six. The names are matched as literals, lower case as `canonicalName` is:
/// comparing with a made `HTTPField.Name` retains its strings, which every thread shares, so every
/// request would contend for their reference count. `SigningHeadersTests` checks each literal
/// against the protocol's header names.
struct SigningHeaders {
    var keyId: String?
    var timestamp: String?
    var nonce: String?
    var signature: String?
    var deviceId: String?
    var deviceCredential: String?

    init(_ fields: HTTPFields) {
        for field in fields {
            let name = field.name.canonicalName
            guard name.hasPrefix("x-backplane-") else { continue }  // most fields are not ours
            switch name {
            case "x-backplane-key": Self.add(field.value, to: &keyId)
            case "x-backplane-timestamp": Self.add(field.value, to: &timestamp)
            case "x-backplane-nonce": Self.add(field.value, to: &nonce)
            case "x-backplane-signature": Self.add(field.value, to: &signature)
            case "x-backplane-device-id": Self.add(field.value, to: &deviceId)
            case "x-backplane-device-credential": Self.add(field.value, to: &deviceCredential)
            default: continue
            }
        }
    }

    /// A repeated field's values joined by ", ", as the subscript joins them (so a repeated
    /// header reads the same, and fails its check the same, either way).
    private static func add(_ value: String, to slot: inout String?) {
        slot = slot.map { "\($0), \(value)" } ?? value
    }
}
