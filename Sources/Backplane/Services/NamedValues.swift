import Foundation
import BackplaneWire

/// Values named in a URL query or a form, parsed from their text, refused with the error body
/// (`ServiceError`) that names them.
enum QueryValue {
    static func int(_ text: String?, name: String) throws -> Int? {
        guard let text else { return nil }
        guard let value = Int(text) else { throw ServiceError.badRequest("'\(name)' must be an integer.") }
        return value
    }

    static func date(_ text: String?, name: String) throws -> Date? {
        guard let text else { return nil }
        guard let date = try? Date(text, strategy: .iso8601) else {
            throw ServiceError.badRequest("'\(name)' must be an RFC 3339 date such as 2026-01-01T00:00:00Z.")
        }
        try Validate.date(date, field: name)
        return date
    }

    /// One of a vocabulary's known values; an unknown one is refused with the list of known ones.
    static func option<Value: WireVocabulary>(_ text: String?, name: String, as: Value.Type) throws -> Value? {
        guard let text else { return nil }
        guard let value = Value.known(text) else {
            throw ServiceError.validation("Unknown \(name) '\(text)'; known: \(Value.knownList).", field: name)
        }
        return value
    }

    static func bool(_ text: String?, name: String) throws -> Bool? {
        switch text {
        case nil: return nil
        case "true", "1": return true
        case "false", "0": return false
        default: throw ServiceError.badRequest("'\(name)' must be true or false.")
        }
    }
}
