import Foundation

/// `POST /v1/sync`: what a device reports when it syncs. Every field is optional; later protocol
/// versions add their sections (command acknowledgements, feed cursors, ...) alongside.
public struct SyncRequest: Codable, Sendable, Equatable {
    /// Reported when they changed since registration (app or OS update).
    public var sdkVersion: String?
    public var appVersion: String?
    public var osVersion: String?
    /// Outcomes of commands from earlier syncs. Idempotent: send each until its result comes back.
    public var acks: [CommandAck]?
    /// What became of granted downloads (completed, failed, deleted). Idempotent, like `acks`.
    public var downloadReports: [DownloadReport]?
    /// The licenses the device holds, to be renewed or ended (`SyncResponse.licenseRenewals`).
    /// Absent when it holds none: such a sync costs nothing more.
    public var licenses: [HeldLicense]?

    public init(
        sdkVersion: String? = nil, appVersion: String? = nil, osVersion: String? = nil, acks: [CommandAck]? = nil,
        downloadReports: [DownloadReport]? = nil, licenses: [HeldLicense]? = nil
    ) {
        self.sdkVersion = sdkVersion
        self.appVersion = appVersion
        self.osVersion = osVersion
        self.acks = acks
        self.downloadReports = downloadReports
        self.licenses = licenses
    }
}

/// The answer of every sync: the device as the server sees it, the effective settings and the
/// server time. Later sections (pending commands, feed changes) are added as new fields.
public struct SyncResponse: Codable, Sendable, Equatable {
    public var device: Device
    public var settings: ApplicationSettings
    public var serverTime: Date
    /// The device's open commands (pending or delivered), oldest first. Execute each once and
    /// acknowledge it in a later sync; a command seen again is acknowledged again, not re-run.
    public var commands: [Command]
    /// One result per acknowledgement sent.
    public var ackResults: [CommandAckResult]
    /// One result per download report sent.
    public var downloadReportResults: [DownloadReportResult]
    /// One per license the sync reported (absent when it reported none): renewed with a new end,
    /// or ended (the device deletes its keys).
    public var licenseRenewals: [LicenseRenewal]?

    public init(
        device: Device, settings: ApplicationSettings, serverTime: Date, commands: [Command] = [], ackResults: [CommandAckResult] = [],
        downloadReportResults: [DownloadReportResult] = [], licenseRenewals: [LicenseRenewal]? = nil
    ) {
        self.licenseRenewals = licenseRenewals
        self.device = device
        self.settings = settings
        self.serverTime = serverTime
        self.commands = commands
        self.ackResults = ackResults
        self.downloadReportResults = downloadReportResults
    }

    /// Absent sections (from an older server) decode as empty.
    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        device = try container.decode(Device.self, forKey: .device)
        settings = try container.decode(ApplicationSettings.self, forKey: .settings)
        serverTime = try container.decode(Date.self, forKey: .serverTime)
        commands = try container.decodeIfPresent([Command].self, forKey: .commands) ?? []
        ackResults = try container.decodeIfPresent([CommandAckResult].self, forKey: .ackResults) ?? []
        downloadReportResults = try container.decodeIfPresent([DownloadReportResult].self, forKey: .downloadReportResults) ?? []
        licenseRenewals = try container.decodeIfPresent([LicenseRenewal].self, forKey: .licenseRenewals)
    }
}
