import Foundation
import BackplaneWire

/// The license servers an application configures (`PUT /v1/admin/license-servers/{system}`):
/// one per DRM system the backplane forwards to (Widevine, PlayReady, FairPlay; ClearKey it
/// answers itself). Header values may be the server's credentials: they are sent with every
/// forward and never shown again, only their names.
public struct LicenseServerService: Sendable {
    let store: any BackplaneStore
    /// The operator lets applications name license servers (`--allow-license-servers`).
    let allowed: Bool
    let now: @Sendable () -> Date

    /// The systems forwarded to.
    static let forwardedSystems: [LicenseSystem] = [.widevine, .playReady, .fairPlay]
    static let maxURLLength = 2048
    /// Headers the backplane writes itself, or that would change how the request is framed.
    static let reservedHeaders: Set<String> = [
        "host", "content-length", "content-type", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer",
        "expect", "proxy-connection", "proxy-authorization",
    ]

    public init(store: any BackplaneStore, allowed: Bool = false, now: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.allowed = allowed
        self.now = now
    }

    /// Sets the application's server for `system`: 403 unless the operator allows license
    /// servers; 400 for a system the backplane does not forward, a URL that is not https, or a
    /// header it may not send.
    public func set(applicationId: String, system: String, _ request: LicenseServerRequest) async throws -> LicenseServer {
        guard allowed else {
            throw ServiceError.forbidden("This backplane does not forward licenses: its operator allows license servers with --allow-license-servers.")
        }
        let system = try Self.forwardedSystem(system)
        try Self.validate(request)
        let record = LicenseServerRecord(
            applicationId: applicationId, system: system.rawValue, url: request.url, headers: request.headers ?? [:], updatedAt: now())
        try await store.setLicenseServer(record)
        return Self.wire(record)
    }

    /// Removes it: licenses of that system are refused (`systemNotConfigured`) from now on.
    public func delete(applicationId: String, system: String) async throws {
        let system = try Self.forwardedSystem(system)
        guard try await store.deleteLicenseServer(applicationId: applicationId, system: system.rawValue) else {
            throw ServiceError.notFound("No \(system.rawValue) license server is configured.")
        }
    }

    public func list(applicationId: String) async throws -> LicenseServerList {
        LicenseServerList(licenseServers: try await store.licenseServers(applicationId: applicationId).map(Self.wire))
    }

    /// The server licenses of `system` go to, if configured (and the operator still allows it).
    func server(applicationId: String, system: LicenseSystem) async throws -> LicenseServerRecord? {
        guard allowed else { return nil }
        return try await store.licenseServers(applicationId: applicationId).first { $0.system == system.rawValue }
    }

    static func forwardedSystem(_ text: String) throws -> LicenseSystem {
        let system = LicenseSystem(rawValue: text)
        guard forwardedSystems.contains(system) else {
            let names = forwardedSystems.map(\.rawValue).joined(separator: ", ")
            let why = system == .clearKey ? " The backplane answers ClearKey itself." : ""
            throw ServiceError.validation("'system' must be one of \(names).\(why)", field: "system")
        }
        return system
    }

    static func validate(_ request: LicenseServerRequest) throws {
        guard request.url.utf8.count <= maxURLLength, let url = URLComponents(string: request.url),
            url.scheme?.lowercased() == "https", let host = url.host, !host.isEmpty, url.user == nil, url.query == nil, url.fragment == nil
        else {
            // No query: a credential belongs in a header, whose value is never shown again.
            throw ServiceError.validation(
                "'url' must be an https URL with a host, no user, no query and no fragment, at most \(maxURLLength) bytes.", field: "url")
        }
        let headers = request.headers ?? [:]
        guard headers.count <= WireLimits.maxLicenseServerHeaders else {
            throw ServiceError.validation("At most \(WireLimits.maxLicenseServerHeaders) headers.", field: "headers")
        }
        // RFC 9110 token characters.
        let tokenCharacters = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        guard Set(headers.keys.map { $0.lowercased() }).count == headers.count else {
            throw ServiceError.validation("A header is named twice (names are compared without case).", field: "headers")
        }
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            guard (1...64).contains(name.utf8.count), name.utf8.allSatisfy(tokenCharacters.contains) else {
                throw ServiceError.validation("Header name '\(name.prefix(64))' must be 1 to 64 token characters.", field: "headers")
            }
            guard !reservedHeaders.contains(name.lowercased()) else {
                throw ServiceError.validation("Header '\(name)' is the backplane's to send.", field: "headers.\(name)")
            }
            guard value.utf8.count <= WireLimits.maxLicenseServerHeaderValueLength,
                value.unicodeScalars.allSatisfy({ $0 == "\t" || ($0.value >= 0x20 && $0.value != 0x7F) })
            else {
                throw ServiceError.validation(
                    "Header '\(name)' must be at most \(WireLimits.maxLicenseServerHeaderValueLength) bytes without control characters.",
                    field: "headers.\(name)")
            }
        }
    }

    static func wire(_ record: LicenseServerRecord) -> LicenseServer {
        LicenseServer(
            system: LicenseSystem(rawValue: record.system), url: record.url, headerNames: record.headers.keys.sorted(),
            updatedAt: record.updatedAt)
    }
}
