import Backplane
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// `docs/openapi.yaml` must describe exactly the routes the router serves and every error code.
/// (Its validity as OpenAPI 3.1 is checked by `openapi-spec-validator` in `scripts/test`.)
@Suite struct APIDocumentTests {
    static let document: String = {
        let root = BuiltProduct.packageRoot
        return (try? String(contentsOf: root.appendingPathComponent("docs/openapi.yaml"), encoding: .utf8)) ?? ""
    }()

    /// "METHOD /path/{param}" for every operation in the document.
    static var documentedOperations: Set<String> {
        var operations = Set<String>()
        var currentPath: String?
        for line in document.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("  /"), line.hasSuffix(":") {
                currentPath = String(line.dropFirst(2).dropLast())
            } else if line.hasPrefix("  "), !line.hasPrefix("   ") {
                currentPath = nil
            } else if let path = currentPath,
                      let method = ["get", "put", "post", "patch", "delete"].first(where: { line == "    \($0):" }) {
                operations.insert("\(method.uppercased()) \(path)")
            }
        }
        return operations
    }

    @Test func everyRouteIsDocumentedAndNothingElse() async throws {
        let fixture = try await Fixture.make()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        // The console's HTML pages are for browsers, not API clients: docs/operations.md describes them.
        let served = Set(buildRouter(fixture.services).routes.map { route in
            let path = "\(route.path)".split(separator: "/").map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }
            return "\(route.method.rawValue) /" + path.joined(separator: "/")
        }.filter { !$0.contains(" /console") })
        #expect(!Self.document.isEmpty, "docs/openapi.yaml not found")
        #expect(served.contains("POST /v1/devices/register") && served.contains("GET /v1/admin/devices/{deviceId}"))
        #expect(served.subtracting(Self.documentedOperations).sorted() == [], "served but not documented")
        #expect(Self.documentedOperations.subtracting(served).sorted() == [], "documented but not served")
    }

    @Test func everyErrorCodeIsDocumented() {
        for code in ErrorCode.allCases {
            #expect(Self.document.contains("        - \(code.rawValue)\n"), "error code \(code.rawValue) missing from the ErrorCode enum")
        }
    }
}
