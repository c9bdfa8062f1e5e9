import Foundation

/// JSON the stores keep in a column: the SQLite store's change snapshots, the PostgreSQL store's
/// `jsonb` columns (bound as text and cast in SQL, read back as text). Dates are milliseconds
/// since 1970, so a snapshot reads the same in either store.
enum StoredJSON {
    static func encode(_ value: some Encodable) throws -> String {
        String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    static func encode(_ value: (some Encodable)?) throws -> String? {
        try value.map { try encode($0) }
    }

    static func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        try decoder.decode(T.self, from: Data(text.utf8))
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        return encoder
    }()

    private static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return decoder
    }()
}
