import Foundation

/// The one JSON format of the wire (docs/openapi.yaml): Swift's default camelCase keys, RFC 3339 UTC
/// dates, keys sorted so the same value always encodes to the same bytes (which signing relies on).
public enum WireJSON {
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }
}
