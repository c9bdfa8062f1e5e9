import Foundation

/// `POST /v1/sync`: what a device reports when it syncs. Every field is optional; later protocol
/// versions add their sections (command acknowledgements, feed cursors, ...) alongside.
public struct SyncRequest: Codable, Sendable, Equatable {
    /// Reported when they changed since registration (app or OS update).
    public var sdkVersion: String?
    public var appVersion: String?
    public var osVersion: String?

    public init(sdkVersion: String? = nil, appVersion: String? = nil, osVersion: String? = nil) {
        self.sdkVersion = sdkVersion
        self.appVersion = appVersion
        self.osVersion = osVersion
    }
}

/// The answer of every sync: the device as the server sees it, the effective settings and the
/// server time. Later sections (pending commands, feed changes) are added as new fields.
public struct SyncResponse: Codable, Sendable, Equatable {
    public var device: Device
    public var settings: ApplicationSettings
    public var serverTime: Date

    public init(device: Device, settings: ApplicationSettings, serverTime: Date) {
        self.device = device
        self.settings = settings
        self.serverTime = serverTime
    }
}
