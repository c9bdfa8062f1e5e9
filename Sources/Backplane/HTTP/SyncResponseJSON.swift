import Foundation
import BackplaneWire

extension SyncResponse {
    /// The same bytes as `WireJSON.encoder().encode(self)`, written directly.
    ///
    /// Every device sends a sync every few minutes, and most answers are the same small object
    /// (the device, the settings, the time, no commands). `JSONEncoder` builds a tree of boxed
    /// values through its generic containers and sorts every object's keys on each call, for an
    /// answer whose keys are always the same; this writes the keys in their sorted order instead.
    /// The download report results, present only on the rarer syncs that carry reports, are still
    /// encoded by `JSONEncoder`. `SyncResponseJSONTests` compares the two on every kind of value,
    /// so a field added to these types must be added here too (that test fails until it is).
    func wireJSON() throws -> [UInt8] {
        var out = WireJSONWriter()
        out.bytes.reserveCapacity(640)
        out.open()
        out.key("ackResults", ackResults)
        out.key("commands", commands)
        out.key("device")
        out.write(device)
        try out.key("downloadReportResults", list: downloadReportResults)
        // Only a sync that reported licenses has the key, as `JSONEncoder` leaves out a nil.
        if let licenseRenewals { try out.key("licenseRenewals", list: licenseRenewals) }
        out.key("serverTime", serverTime)
        out.key("settings")
        out.write(settings)
        out.close()
        return out.bytes
    }
}

/// Writes JSON exactly as `WireJSON.encoder()` does (sorted keys, RFC 3339 dates, `\/`), for
/// the values it is given in key order. Server-side only: the SDK decodes these answers.
struct WireJSONWriter {
    var bytes: [UInt8] = []
    private var needsComma = false

    mutating func open() {
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
    }

    mutating func close() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    mutating func key(_ name: StaticString) {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        // One byte at a time: an array literal here is an allocation per key.
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
        needsComma = true
    }

    mutating func key(_ name: StaticString, _ value: String) {
        key(name)
        string(value)
    }

    /// Nothing when `value` is nil: `JSONEncoder` leaves absent optionals out.
    mutating func key(_ name: StaticString, _ value: String?) {
        if let value { key(name, value) }
    }

    mutating func key(_ name: StaticString, _ value: Int) {
        key(name)
        bytes.append(contentsOf: String(value).utf8)
    }

    mutating func key(_ name: StaticString, _ value: Bool) {
        key(name)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    mutating func key(_ name: StaticString, _ value: Date) {
        key(name)
        // By hand within the years it covers, straight into the answer (the text has nothing to
        // escape): no format style per call, on the path of every sync's answer.
        guard UTCDateText.gregorianFourDigitYears.contains(value) else { return string(value.formatted(.iso8601)) }
        bytes.append(UInt8(ascii: "\""))
        UTCDateText.appendISO8601(value, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    mutating func key(_ name: StaticString, _ value: Date?) {
        if let value { key(name, value) }
    }

    /// An empty list as `[]`, any other through `JSONEncoder`.
    mutating func key(_ name: StaticString, list: [some Encodable]) throws {
        key(name)
        if list.isEmpty {
            bytes.append(UInt8(ascii: "["))
            bytes.append(UInt8(ascii: "]"))
        } else {
            bytes.append(contentsOf: try WireJSON.encoder().encode(list))
        }
    }

    mutating func write(_ device: Device) {
        open()
        key("appVersion", device.appVersion)
        key("deviceId", device.deviceId)
        key("downloadEnabled", device.downloadEnabled)
        key("externalDeviceId", device.externalDeviceId)
        key("lastSeenAt", device.lastSeenAt)
        key("model", device.model)
        key("nickname", device.nickname)
        key("osVersion", device.osVersion)
        key("platform", device.platform)
        key("pushProvider", device.pushProvider?.rawValue)
        key("pushToken", device.pushToken)
        key("registeredAt", device.registeredAt)
        key("sdkVersion", device.sdkVersion)
        key("unregisteredAt", device.unregisteredAt)
        key("updatedAt", device.updatedAt)
        key("userId", device.userId)
        close()
    }

    mutating func key(_ name: StaticString, _ commands: [Command]) {
        key(name)
        array(commands) { $0.write($1) }
    }

    mutating func key(_ name: StaticString, _ results: [CommandAckResult]) {
        key(name)
        array(results) { out, result in
            out.open()
            out.key("commandId", result.commandId)
            out.key("message", result.message)
            out.key("status", result.status.rawValue)
            out.close()
        }
    }

    mutating func key(_ name: StaticString, _ strings: [String]?) {
        guard let strings else { return }
        key(name)
        array(strings) { $0.string($1) }
    }

    /// `[`, each element as `element` writes it, a comma between two, `]`.
    private mutating func array<Element>(_ elements: [Element], _ element: (inout WireJSONWriter, Element) -> Void) {
        bytes.append(UInt8(ascii: "["))
        for (index, item) in elements.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            element(&self, item)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    mutating func write(_ command: Command) {
        open()
        key("assetIds", command.assetIds)
        key("commandId", command.commandId)
        key("completedAt", command.completedAt)
        key("createdAt", command.createdAt)
        key("deferrals", command.deferrals)
        key("deliveredAt", command.deliveredAt)
        key("deviceId", command.deviceId)
        key("expiresAt", command.expiresAt)
        key("failureReason", command.failureReason)
        key("state", command.state.rawValue)
        key("type", command.type.rawValue)
        close()
    }

    mutating func write(_ settings: ApplicationSettings) {
        open()
        key("deviceLimit", settings.deviceLimit)
        key("expiryAfterDownloadSeconds", settings.expiryAfterDownloadSeconds)
        key("expiryAfterPlaySeconds", settings.expiryAfterPlaySeconds)
        key("maxCopiesPerAccount", settings.maxCopiesPerAccount)
        key("maxDownloadsPerAccount", settings.maxDownloadsPerAccount)
        key("maxDownloadsPerDevice", settings.maxDownloadsPerDevice)
        key("maxLifetimeDownloadsPerAsset", settings.maxLifetimeDownloadsPerAsset)
        key("offlineViewingPeriodSeconds", settings.offlineViewingPeriodSeconds)
        close()
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// A JSON string as `JSONEncoder` escapes it: quote, backslash and slash, the short escapes
    /// for backspace, form feed, newline, return and tab, `\u00xx` for other control characters,
    /// everything else as its UTF-8.
    mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        // Most strings (ids, versions, platforms) have nothing to escape: copied whole.
        if value.utf8.allSatisfy({ $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") && $0 != UInt8(ascii: "/") }) {
            bytes.append(contentsOf: value.utf8)
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"):
                bytes.append(contentsOf: [UInt8(ascii: "\\"), byte])
            case 0x08: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x00..<0x20:
                let hex = Self.hexDigits
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                          hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
