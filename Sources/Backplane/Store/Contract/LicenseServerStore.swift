import Foundation
import BackplaneWire

/// The license servers applications configure, one per DRM system the backplane forwards to.
public protocol LicenseServerStore: Sendable {
    /// Sets (or replaces) the application's server for the record's system.
    func setLicenseServer(_ server: LicenseServerRecord) async throws
    /// Removes it; false when there was none.
    func deleteLicenseServer(applicationId: String, system: String) async throws -> Bool
    /// The application's servers, by system.
    func licenseServers(applicationId: String) async throws -> [LicenseServerRecord]
}

/// Where an application's licenses of one system are forwarded, and the headers sent with them.
public struct LicenseServerRecord: Sendable, Equatable {
    public var applicationId: String
    /// `LicenseSystem.rawValue`.
    public var system: String
    public var url: String
    public var headers: [String: String]
    public var updatedAt: Date

    /// The headers as stored: a JSON object, keys sorted.
    var headersText: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: (try? encoder.encode(headers)) ?? Data("{}".utf8), as: UTF8.self)
    }

    static func headers(from text: String) throws -> [String: String] {
        try JSONDecoder().decode([String: String].self, from: Data(text.utf8))
    }
}
