import Foundation

/// Turns a `DecodingError` into a message that names the field, for the 400 answers of the
/// backplane (a whole body, or one event of a batch). `package`: shared by this package's targets.
package enum DecodingProblem {
    /// `subject` names the whole value ("The body", "The event") when the problem is not in a
    /// field; `relativeTo` is the coding path of that value, left out of field names (an event of
    /// a batch names its own fields, not `events[3].…`).
    package static func message(_ error: DecodingError, subject: String, relativeTo base: [any CodingKey] = []) -> String {
        func path(_ codingPath: [any CodingKey]) -> String {
            codingPath.dropFirst(base.count).reduce(into: "") { text, key in
                if let index = key.intValue {
                    text += "[\(index)]"
                } else {
                    text += (text.isEmpty ? "" : ".") + key.stringValue
                }
            }
        }
        func field(_ codingPath: [any CodingKey]) -> String {
            let location = path(codingPath)
            return location.isEmpty ? subject : "Field '\(location)'"
        }
        switch error {
        case .keyNotFound(let key, let context):
            let parent = path(context.codingPath)
            return "Missing required field '\(parent.isEmpty ? key.stringValue : parent + "." + key.stringValue)'."
        case .typeMismatch(let type, let context):
            return "\(field(context.codingPath)) has the wrong type; expected \(type)."
        case .valueNotFound(let type, let context):
            return "\(field(context.codingPath)) must not be null; expected \(type)."
        case .dataCorrupted(let context):
            let location = path(context.codingPath)
            return location.isEmpty ? "\(subject) is not valid JSON." : "Field '\(location)' is invalid: \(context.debugDescription)"
        @unknown default:
            return "\(subject) could not be decoded."
        }
    }
}
