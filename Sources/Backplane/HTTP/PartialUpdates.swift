import Foundation
import Hummingbird
import BackplaneWire

/// A body that changes only the fields it names (the admin PATCH routes). Decoding alone would
/// drop a misspelt field (`devicelimit`) and answer 200 having changed nothing; such a body is
/// refused instead, naming the field. Device routes stay lenient: an SDK newer than its server
/// may send a field the server does not know yet.
protocol PartialUpdate: Decodable {
    /// The JSON keys the body may hold.
    static var fields: Set<String> { get }
}

extension ApplicationSettingsUpdate: PartialUpdate {
    /// The settings' names.
    static let fields = Set(ApplicationSettings.fields.map(\.name))
}

extension Request {
    func decode<T: PartialUpdate>(partialUpdate type: T.Type, context: some RequestContext) async throws -> T {
        var request = self
        // Collected once; the decoder below reads the same buffer.
        let buffer = try await request.collectBody(upTo: context.maxUploadSize)
        if let object = try? JSONSerialization.jsonObject(with: Data(buffer: buffer)) as? [String: Any] {
            if let unknown = object.keys.sorted().first(where: { !T.fields.contains($0) }) {
                throw ServiceError.validation(
                    "Unknown field '\(unknown)'; this body takes \(T.fields.sorted().joined(separator: ", ")). Nothing was changed.",
                    field: unknown)
            }
        }
        return try await request.decode(as: T.self, context: context)
    }
}
