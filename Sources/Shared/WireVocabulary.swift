import Foundation

/// A vocabulary of the wire that grows with releases: command types, error codes, states,
/// reasons. Each is a struct with a raw value and static members, as async-http-client's
/// `HTTPClientError` is, rather than an enum: a value a later backplane adds still decodes in an
/// SDK that shipped before it (an app stays installed for years), where an enum would make the
/// whole answer undecodable. Code compares against the constants (`type == .wipe`, or `switch`
/// with a `default`); `isKnown` tells a value of this build's vocabulary from a later one.
///
/// The backplane reads requests with `WireVocabularyDecoding.knownValuesOnly` set, so what a
/// client sends must be a value the server knows: an unknown one is a 400 that names the field
/// and the values it could have been, as with an enum.
public protocol WireVocabulary: RawRepresentable, CaseIterable, Codable, Hashable, Sendable, CustomStringConvertible
where RawValue == String, AllCases == [Self] {
    /// Any value decodes; `isKnown` says whether this build knows it.
    init(rawValue: String)
}

extension WireVocabulary {
    public var description: String { rawValue }

    /// One of the values this build defines (`allCases`), not one added by a later release.
    public var isKnown: Bool { Self.allCases.contains(self) }

    /// The value spelled `rawValue` if this build knows it: for query parameters and stored
    /// values that must be one of the known ones.
    public static func known(_ rawValue: String) -> Self? {
        let value = Self(rawValue: rawValue)
        return value.isKnown ? value : nil
    }

    /// The known values, for messages: "a, b, c".
    public static var knownList: String { allCases.map(\.rawValue).joined(separator: ", ") }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let rawValue = try container.decode(String.self)
        self.init(rawValue: rawValue)
        if decoder.userInfo[WireVocabularyDecoding.knownValuesOnly] as? Bool == true, !isKnown {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "'\(rawValue)' is not one of the known values: \(Self.knownList).")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

public enum WireVocabularyDecoding {
    /// Set to `true` in a decoder's `userInfo` to refuse values a `WireVocabulary` does not know:
    /// the backplane reading what clients send. Clients leave it unset and accept later values.
    public static let knownValuesOnly = CodingUserInfoKey(rawValue: "backplane.wireVocabulary.knownValuesOnly")!
}
