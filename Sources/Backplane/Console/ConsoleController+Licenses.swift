import Foundation
import Hummingbird
import BackplaneWire

/// An asset's protection as support staff see it: its content keys' ids (never a key), and
/// where the application's licenses of other systems go (header names only).
extension ConsoleController {
    func addLicenseRoutes(to group: RouterGroup<ConsoleRequestContext>) {
        group.get("assets/:assetId", use: asset)
    }

    struct KeyIdRow {
        let kid: String
        let created: String
    }

    struct LicenseServerRow {
        let system: String
        let url: String
        let headers: String
        let updated: String
    }

    struct AssetModel {
        let assetId: String
        let keys: [KeyIdRow]
        let servers: [LicenseServerRow]
    }

    @Sendable func asset(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        try context.session.require(.admin, toDo: "The asset page")
        let assetId = try context.pathValue("assetId")
        let keys = try await services.contentKeys.list(applicationId: context.applicationId, assetId: assetId)
        let servers = try await services.licenseServers.list(applicationId: context.applicationId)
        let model = AssetModel(
            assetId: assetId, keys: keys.keys.map { KeyIdRow(kid: $0.kid, created: ConsoleFormat.time($0.createdAt)) },
            servers: servers.licenseServers.map { server in
                LicenseServerRow(
                    system: server.system.rawValue, url: server.url, headers: server.headerNames.joined(separator: ", "),
                    updated: ConsoleFormat.time(server.updatedAt))
            })
        return renderer.page("asset", title: "Asset \(assetId)", model: model, session: context.session, current: .find)
    }
}
