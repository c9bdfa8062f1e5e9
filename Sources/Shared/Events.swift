import Foundation

// The event log (docs/reporting.md): records a device logs, uploaded in batches to
// `POST /v1/events`, queried and exported by the reporting API.

/// What happened. The wire value is the case name.
public struct EventType: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let appLaunch = EventType(rawValue: "appLaunch")
    public static let queuedForDownload = EventType(rawValue: "queuedForDownload")
    public static let removedFromQueue = EventType(rawValue: "removedFromQueue")
    public static let downloadStart = EventType(rawValue: "downloadStart")
    public static let downloadComplete = EventType(rawValue: "downloadComplete")
    public static let downloadError = EventType(rawValue: "downloadError")
    public static let downloadWarning = EventType(rawValue: "downloadWarning")
    public static let maxErrorsReset = EventType(rawValue: "maxErrorsReset")
    public static let assetDeleted = EventType(rawValue: "assetDeleted")
    public static let assetExpired = EventType(rawValue: "assetExpired")
    public static let playStart = EventType(rawValue: "playStart")
    public static let playStop = EventType(rawValue: "playStop")
    /// The SDK's data was reset: a fresh install or a remote wipe (`resetType`).
    public static let reset = EventType(rawValue: "reset")
    public static let downloadLimitReached = EventType(rawValue: "downloadLimitReached")
    public static let playbackInitiated = EventType(rawValue: "playbackInitiated")
    /// The app's own event, with `customName` and a string or numeric value.
    public static let custom = EventType(rawValue: "custom")
    public static let allCases: [EventType] = [
        .appLaunch, .queuedForDownload, .removedFromQueue, .downloadStart, .downloadComplete, .downloadError, .downloadWarning,
        .maxErrorsReset, .assetDeleted, .assetExpired, .playStart, .playStop, .reset, .downloadLimitReached, .playbackInitiated,
        .custom,
    ]

    /// The types the business depends on: they cannot be disabled on the device.
    public static let mandatory: Set<EventType> = [.queuedForDownload, .downloadStart, .downloadComplete, .downloadError, .maxErrorsReset, .reset]

    public var isMandatory: Bool { Self.mandatory.contains(self) }

    /// Types that are about one asset and must name it.
    public var requiresAssetId: Bool { Self.aboutOneAsset.contains(self) }

    private static let aboutOneAsset: Set<EventType> = [
        .queuedForDownload, .removedFromQueue, .downloadStart, .downloadComplete, .downloadError, .downloadWarning,
        .assetDeleted, .assetExpired, .playStart, .playStop, .playbackInitiated,
    ]
}

/// Why the SDK's data was reset.
public struct ResetType: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The SDK started with no data: a new install (or its data was cleared).
    public static let install = ResetType(rawValue: "install")
    /// A remote wipe or kill deleted every download.
    public static let remoteWipe = ResetType(rawValue: "remoteWipe")
    public static let allCases: [ResetType] = [.install, .remoteWipe]
}

/// Which download permission denied a download.
public struct DownloadLimitType: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let account = DownloadLimitType(rawValue: "account")
    public static let asset = DownloadLimitType(rawValue: "asset")
    public static let copies = DownloadLimitType(rawValue: "copies")
    public static let device = DownloadLimitType(rawValue: "device")
    /// The app's own rule said no.
    public static let external = DownloadLimitType(rawValue: "external")
    public static let allCases: [DownloadLimitType] = [.account, .asset, .copies, .device, .external]
}

/// Whether the app was in front when the event was logged.
public struct AppState: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let foreground = AppState(rawValue: "foreground")
    public static let background = AppState(rawValue: "background")
    public static let unknown = AppState(rawValue: "unknown")
    public static let allCases: [AppState] = [.foreground, .background, .unknown]
}

/// What an event says: its type and the fields that type uses. Build it with the static
/// constructors (`.downloadStart(assetId:)`, `.custom(name:string:)`, ...).
public struct EventContent: Codable, Sendable, Equatable {
    public var type: EventType
    public var assetId: String?
    /// `assetDeleted`: why.
    public var deletionReason: AssetDeletionReason?
    /// `reset`: what kind.
    public var resetType: ResetType?
    /// `downloadLimitReached`: which limit.
    public var limitType: DownloadLimitType?
    /// Bits per second (download complete, play start).
    public var bitrate: Int64?
    /// Seconds: the download's length for `downloadComplete`, the time watched for `playStop`.
    public var durationSeconds: Double?
    public var errorCode: String?
    public var errorMessage: String?
    /// `custom`: the app's name for the event, and its value.
    public var customName: String?
    public var customString: String?
    public var customNumber: Double?

    public init(
        type: EventType, assetId: String? = nil, deletionReason: AssetDeletionReason? = nil, resetType: ResetType? = nil,
        limitType: DownloadLimitType? = nil, bitrate: Int64? = nil, durationSeconds: Double? = nil, errorCode: String? = nil,
        errorMessage: String? = nil, customName: String? = nil, customString: String? = nil, customNumber: Double? = nil
    ) {
        self.type = type
        self.assetId = assetId
        self.deletionReason = deletionReason
        self.resetType = resetType
        self.limitType = limitType
        self.bitrate = bitrate
        self.durationSeconds = durationSeconds
        self.errorCode = errorCode
        self.errorMessage = errorMessage
        self.customName = customName
        self.customString = customString
        self.customNumber = customNumber
    }

    public static var appLaunch: Self { .init(type: .appLaunch) }
    public static func queuedForDownload(assetId: String) -> Self { .init(type: .queuedForDownload, assetId: assetId) }
    public static func removedFromQueue(assetId: String) -> Self { .init(type: .removedFromQueue, assetId: assetId) }
    public static func downloadStart(assetId: String) -> Self { .init(type: .downloadStart, assetId: assetId) }
    public static func downloadComplete(assetId: String, bitrate: Int64? = nil, durationSeconds: Double? = nil) -> Self {
        .init(type: .downloadComplete, assetId: assetId, bitrate: bitrate, durationSeconds: durationSeconds)
    }
    public static func downloadError(assetId: String, code: String? = nil, message: String? = nil) -> Self {
        .init(type: .downloadError, assetId: assetId, errorCode: code, errorMessage: message)
    }
    public static func downloadWarning(assetId: String, code: String? = nil, message: String? = nil) -> Self {
        .init(type: .downloadWarning, assetId: assetId, errorCode: code, errorMessage: message)
    }
    /// `assetId` nil: the counts of every asset were reset.
    public static func maxErrorsReset(assetId: String? = nil) -> Self { .init(type: .maxErrorsReset, assetId: assetId) }
    public static func assetDeleted(assetId: String, reason: AssetDeletionReason) -> Self {
        .init(type: .assetDeleted, assetId: assetId, deletionReason: reason)
    }
    public static func assetExpired(assetId: String) -> Self { .init(type: .assetExpired, assetId: assetId) }
    public static func playStart(assetId: String, bitrate: Int64? = nil) -> Self { .init(type: .playStart, assetId: assetId, bitrate: bitrate) }
    public static func playStop(assetId: String, durationSeconds: Double? = nil) -> Self {
        .init(type: .playStop, assetId: assetId, durationSeconds: durationSeconds)
    }
    public static func reset(_ type: ResetType) -> Self { .init(type: .reset, resetType: type) }
    public static func downloadLimitReached(_ limit: DownloadLimitType, assetId: String? = nil) -> Self {
        .init(type: .downloadLimitReached, assetId: assetId, limitType: limit)
    }
    public static func playbackInitiated(assetId: String) -> Self { .init(type: .playbackInitiated, assetId: assetId) }
    public static func custom(name: String, string: String? = nil, number: Double? = nil) -> Self {
        .init(type: .custom, customName: name, customString: string, customNumber: number)
    }

    /// The first rule this content breaks (the limits in `WireLimits`), or nil. The SDK checks it before
    /// queueing and the backplane again on arrival, with the same words.
    public var problem: EventProblem? {
        func text(_ value: String?, _ field: String, max: Int) -> EventProblem? {
            guard let value else { return nil }
            if value.isEmpty { return EventProblem(field: field, message: "'\(field)' must not be empty.") }
            if value.utf8.count > max { return EventProblem(field: field, message: "'\(field)' is longer than \(max) bytes.") }
            return nil
        }
        // Values an app built itself (`EventType(rawValue:)`) must be ones this build knows.
        var unknown: (value: String, field: String)?
        if !type.isKnown {
            unknown = (type.rawValue, "type")
        } else if let reason = deletionReason, !reason.isKnown {
            unknown = (reason.rawValue, "deletionReason")
        } else if let reset = resetType, !reset.isKnown {
            unknown = (reset.rawValue, "resetType")
        } else if let limit = limitType, !limit.isKnown {
            unknown = (limit.rawValue, "limitType")
        }
        if let unknown { return EventProblem(field: unknown.field, message: "'\(unknown.value)' is not a known \(unknown.field).") }
        if type.requiresAssetId, assetId == nil {
            return EventProblem(field: "assetId", message: "A \(type.rawValue) event needs 'assetId'.")
        }
        if type == .assetDeleted, deletionReason == nil {
            return EventProblem(field: "deletionReason", message: "An assetDeleted event needs 'deletionReason'.")
        }
        if type == .reset, resetType == nil {
            return EventProblem(field: "resetType", message: "A reset event needs 'resetType'.")
        }
        if type == .downloadLimitReached, limitType == nil {
            return EventProblem(field: "limitType", message: "A downloadLimitReached event needs 'limitType'.")
        }
        if type == .custom, customName == nil {
            return EventProblem(field: "customName", message: "A custom event needs 'customName'.")
        }
        if let problem = text(assetId, "assetId", max: WireLimits.maxIdentifierLength)
            ?? text(errorCode, "errorCode", max: WireLimits.maxShortTextLength)
            ?? text(errorMessage, "errorMessage", max: WireLimits.maxEventMessageBytes)
            ?? text(customName, "customName", max: WireLimits.maxShortTextLength)
            ?? text(customString, "customString", max: WireLimits.maxEventMessageBytes) {
            return problem
        }
        if let bitrate, bitrate < 0 { return EventProblem(field: "bitrate", message: "'bitrate' must not be negative.") }
        if let durationSeconds, !(durationSeconds >= 0 && durationSeconds.isFinite) {
            return EventProblem(field: "durationSeconds", message: "'durationSeconds' must be a finite number ≥ 0.")
        }
        if let customNumber, !customNumber.isFinite {
            return EventProblem(field: "customNumber", message: "'customNumber' must be finite.")
        }
        return nil
    }
}

/// Why an event is refused: the field and a message for people.
public struct EventProblem: Sendable, Equatable, Error {
    public var field: String
    public var message: String

    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }
}

/// One event as a device uploads it: the common fields, then the content's fields in the same
/// JSON object. The device is the one that signed the upload, so it is not repeated here.
public struct DeviceEvent: Codable, Sendable, Equatable {
    /// A UUID chosen by the device, reported back by the reporting API.
    public var eventId: String
    /// Per device, increasing, never reused: the idempotency key together with the device.
    public var sequence: Int64
    /// When it happened, by the device's clock.
    public var deviceTime: Date
    public var appState: AppState?
    public var platform: String?
    public var sdkVersion: String?
    public var appVersion: String?
    /// The user the device belonged to when the event happened.
    public var userId: String
    public var externalDeviceId: String?
    public var content: EventContent

    public init(
        eventId: String, sequence: Int64, deviceTime: Date, appState: AppState? = nil, platform: String? = nil, sdkVersion: String? = nil,
        appVersion: String? = nil, userId: String, externalDeviceId: String? = nil, content: EventContent
    ) {
        self.eventId = eventId
        self.sequence = sequence
        self.deviceTime = deviceTime
        self.appState = appState
        self.platform = platform
        self.sdkVersion = sdkVersion
        self.appVersion = appVersion
        self.userId = userId
        self.externalDeviceId = externalDeviceId
        self.content = content
    }

    // One keyed container for the common and the content fields: the decoder indexes an object's
    // keys once per container, and ingestion decodes hundreds of events per request.
    private enum CodingKeys: String, CodingKey {
        case eventId, sequence, deviceTime, appState, platform, sdkVersion, appVersion, userId, externalDeviceId
        case type, assetId, deletionReason, resetType, limitType, bitrate, durationSeconds, errorCode, errorMessage
        case customName, customString, customNumber
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        eventId = try container.decode(String.self, forKey: .eventId)
        sequence = try container.decode(Int64.self, forKey: .sequence)
        deviceTime = try container.decode(Date.self, forKey: .deviceTime)
        appState = try container.decodeIfPresent(AppState.self, forKey: .appState)
        platform = try container.decodeIfPresent(String.self, forKey: .platform)
        sdkVersion = try container.decodeIfPresent(String.self, forKey: .sdkVersion)
        appVersion = try container.decodeIfPresent(String.self, forKey: .appVersion)
        userId = try container.decode(String.self, forKey: .userId)
        externalDeviceId = try container.decodeIfPresent(String.self, forKey: .externalDeviceId)
        content = EventContent(
            type: try container.decode(EventType.self, forKey: .type),
            assetId: try container.decodeIfPresent(String.self, forKey: .assetId),
            deletionReason: try container.decodeIfPresent(AssetDeletionReason.self, forKey: .deletionReason),
            resetType: try container.decodeIfPresent(ResetType.self, forKey: .resetType),
            limitType: try container.decodeIfPresent(DownloadLimitType.self, forKey: .limitType),
            bitrate: try container.decodeIfPresent(Int64.self, forKey: .bitrate),
            durationSeconds: try container.decodeIfPresent(Double.self, forKey: .durationSeconds),
            errorCode: try container.decodeIfPresent(String.self, forKey: .errorCode),
            errorMessage: try container.decodeIfPresent(String.self, forKey: .errorMessage),
            customName: try container.decodeIfPresent(String.self, forKey: .customName),
            customString: try container.decodeIfPresent(String.self, forKey: .customString),
            customNumber: try container.decodeIfPresent(Double.self, forKey: .customNumber))
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(eventId, forKey: .eventId)
        try container.encode(sequence, forKey: .sequence)
        try container.encode(deviceTime, forKey: .deviceTime)
        try container.encodeIfPresent(appState, forKey: .appState)
        try container.encodeIfPresent(platform, forKey: .platform)
        try container.encodeIfPresent(sdkVersion, forKey: .sdkVersion)
        try container.encodeIfPresent(appVersion, forKey: .appVersion)
        try container.encode(userId, forKey: .userId)
        try container.encodeIfPresent(externalDeviceId, forKey: .externalDeviceId)
        try container.encode(content.type, forKey: .type)
        try container.encodeIfPresent(content.assetId, forKey: .assetId)
        try container.encodeIfPresent(content.deletionReason, forKey: .deletionReason)
        try container.encodeIfPresent(content.resetType, forKey: .resetType)
        try container.encodeIfPresent(content.limitType, forKey: .limitType)
        try container.encodeIfPresent(content.bitrate, forKey: .bitrate)
        try container.encodeIfPresent(content.durationSeconds, forKey: .durationSeconds)
        try container.encodeIfPresent(content.errorCode, forKey: .errorCode)
        try container.encodeIfPresent(content.errorMessage, forKey: .errorMessage)
        try container.encodeIfPresent(content.customName, forKey: .customName)
        try container.encodeIfPresent(content.customString, forKey: .customString)
        try container.encodeIfPresent(content.customNumber, forKey: .customNumber)
    }

    /// The first rule this event breaks, or nil: its content's rules plus the common fields' and
    /// the size limit of one event.
    public var problem: EventProblem? {
        if eventId.isEmpty || eventId.utf8.count > WireLimits.maxIdentifierLength {
            return EventProblem(field: "eventId", message: "'eventId' must be 1 to \(WireLimits.maxIdentifierLength) bytes.")
        }
        if sequence < 1 { return EventProblem(field: "sequence", message: "'sequence' must be 1 or more.") }
        if !WireLimits.acceptedDates.contains(deviceTime) {
            return EventProblem(field: "deviceTime", message: WireLimits.dateOutOfRangeMessage(field: "deviceTime"))
        }
        if userId.isEmpty || userId.utf8.count > WireLimits.maxIdentifierLength {
            return EventProblem(field: "userId", message: "'userId' must be 1 to \(WireLimits.maxIdentifierLength) bytes.")
        }
        for (field, value, max) in [
            ("platform", platform, WireLimits.maxShortTextLength), ("sdkVersion", sdkVersion, WireLimits.maxShortTextLength),
            ("appVersion", appVersion, WireLimits.maxShortTextLength), ("externalDeviceId", externalDeviceId, WireLimits.maxIdentifierLength),
        ] {
            if let value, value.utf8.count > max { return EventProblem(field: field, message: "'\(field)' is longer than \(max) bytes.") }
        }
        // Some databases cannot store U+0000 in text (PostgreSQL): refused everywhere alike.
        if [eventId, userId, platform, sdkVersion, appVersion, externalDeviceId, content.assetId, content.errorCode,
            content.errorMessage, content.customName, content.customString].contains(where: { $0?.unicodeScalars.contains("\u{0}") == true }) {
            return EventProblem(field: "event", message: "Text fields must not contain U+0000 (NUL).")
        }
        if let problem = content.problem { return problem }
        if textBytes > WireLimits.maxEventTextBytes {
            return EventProblem(field: "event", message: "The event's text fields together are \(textBytes) bytes; at most \(WireLimits.maxEventTextBytes) are accepted.")
        }
        return nil
    }

    /// The UTF-8 bytes of every text field: what makes one event large (the rest is fixed-size).
    public var textBytes: Int {
        [eventId, userId, platform, sdkVersion, appVersion, externalDeviceId, content.assetId, content.errorCode,
         content.errorMessage, content.customName, content.customString].reduce(0) { $0 + ($1?.utf8.count ?? 0) }
    }
}
