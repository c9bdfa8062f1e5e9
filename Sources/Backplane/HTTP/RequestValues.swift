import Foundation
import Hummingbird
import BackplaneWire

extension RequestContext {
    /// A path parameter, percent-decoded. No identifier holds U+0000, and PostgreSQL cannot
    /// even look one up: refused here.
    func pathValue(_ name: String) throws -> String {
        let raw = try parameters.require(name)
        let value = raw.removingPercentEncoding ?? raw
        guard !value.unicodeScalars.contains("\u{0}") else { throw ServiceError.badRequest("'\(name)' must not contain U+0000.") }
        return value
    }
}
