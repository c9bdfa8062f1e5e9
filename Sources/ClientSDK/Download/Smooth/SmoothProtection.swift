import Foundation

/// A Smooth Streaming (PIFF) `ProtectionHeader` as the app's license provider receives it, in
/// the shape a DASH `ContentProtection` has (`LicenseRequest.contentProtection`): the scheme
/// `urn:uuid:<SystemID>`, the header wrapped in a version 0 `pssh` box for that system (what a
/// DASH manifest's `cenc:pssh` holds), and for PlayReady the key id its header names. The
/// local manifest keeps the element as it was, for the player.
enum SmoothProtection {
    static let playReadySystemId = "9a04f079-9840-4286-ab92-e65be0885f95"

    static func contentProtection(_ header: MPDElement) -> ContentProtection {
        let systemId = (header.attributes["SystemID"] ?? "").trimmingCharacters(in: CharacterSet(charactersIn: "{} ")).lowercased()
        let data = Data(base64Encoded: header.text, options: .ignoreUnknownCharacters)
        return ContentProtection(
            schemeIdUri: "urn:uuid:\(systemId)", defaultKID: systemId == playReadySystemId ? data.flatMap(playReadyKeyId) : nil,
            pssh: data.flatMap { psshBox(systemId: systemId, data: $0) })
    }

    /// A version 0 `pssh` box (ISO/IEC 23001-7 §8.1) for `systemId` holding `data`; nil when the
    /// id is not a UUID or the box would not fit its 32-bit size.
    static func psshBox(systemId: String, data: Data) -> Data? {
        guard let uuid = UUID(uuidString: systemId), let size = UInt32(exactly: 32 + data.count) else { return nil }
        var box = Data()
        box.append(contentsOf: withUnsafeBytes(of: size.bigEndian, Array.init))
        box.append(contentsOf: Array("pssh".utf8))
        box.append(contentsOf: [0, 0, 0, 0])
        box.append(contentsOf: withUnsafeBytes(of: uuid.uuid, Array.init))
        box.append(contentsOf: withUnsafeBytes(of: UInt32(data.count).bigEndian, Array.init))
        box.append(data)
        return box
    }

    /// The key id a PlayReady object names, as a lowercase UUID: the `KID` of its rights
    /// management header (the element's text in WRMHEADER 4.0, its `VALUE` from 4.1 on), a
    /// base64 GUID whose first three fields are little-endian. Nil when the object, its header
    /// or the id is not what the format says.
    static func playReadyKeyId(_ object: Data) -> String? {
        let bytes = [UInt8](object)
        func uint16(_ at: Int) -> Int? { at + 2 <= bytes.count ? Int(bytes[at]) | Int(bytes[at + 1]) << 8 : nil }
        // Length (32 bits), record count (16), then records of type (16), length (16) and value.
        guard bytes.count >= 6, let records = uint16(4) else { return nil }
        var offset = 6
        for _ in 0..<records {
            guard let type = uint16(offset), let length = uint16(offset + 2), offset + 4 + length <= bytes.count else { return nil }
            let value = Data(bytes[(offset + 4)..<(offset + 4 + length)])
            offset += 4 + length
            // A record is at most 64 KiB (its length is 16 bits); type 1 is the header.
            guard type == 1 else { continue }
            guard let xml = String(data: value, encoding: .utf16LittleEndian), let root = try? MPDDocument.parseXML(Data(xml.utf8)),
                  let kid = firstElement(named: "KID", in: root)
            else { return nil }
            let text = kid.attributes["VALUE"] ?? kid.text
            guard let guid = Data(base64Encoded: text), guid.count == 16 else { return nil }
            let g = [UInt8](guid)
            let uuid = UUID(uuid: (g[3], g[2], g[1], g[0], g[5], g[4], g[7], g[6], g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]))
            return uuid.uuidString.lowercased()
        }
        return nil
    }

    private static func firstElement(named name: String, in element: MPDElement) -> MPDElement? {
        if element.name == name { return element }
        for child in element.children {
            if let found = firstElement(named: name, in: child) { return found }
        }
        return nil
    }
}
