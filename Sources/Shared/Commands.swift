import Foundation

/// What the backplane can ask one device to do.
public struct CommandType: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Delete every downloaded asset and its files.
    public static let wipe = CommandType(rawValue: "wipe")
    /// Delete the assets listed in `assetIds`.
    public static let deleteAssets = CommandType(rawValue: "deleteAssets")
    /// Wipe, unregister, and forget the device credential.
    public static let kill = CommandType(rawValue: "kill")
    /// Unregister the device (it stops downloading and syncing).
    public static let unregister = CommandType(rawValue: "unregister")
    /// Sync again now (nothing else).
    public static let syncNow = CommandType(rawValue: "syncNow")
    public static let allCases: [CommandType] = [.wipe, .deleteAssets, .kill, .unregister, .syncNow]
}

/// pending → delivered → succeeded | failed | expired; pending → cancelled.
public struct CommandState: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Enqueued, not yet handed to the device.
    public static let pending = CommandState(rawValue: "pending")
    /// Handed to the device in a sync answer; waiting for its acknowledgement.
    public static let delivered = CommandState(rawValue: "delivered")
    public static let succeeded = CommandState(rawValue: "succeeded")
    /// The device reported it could not do it (`failureReason`).
    public static let failed = CommandState(rawValue: "failed")
    /// Its `expiresAt` passed before the device acknowledged it.
    public static let expired = CommandState(rawValue: "expired")
    /// An admin cancelled it before delivery.
    public static let cancelled = CommandState(rawValue: "cancelled")
    public static let allCases: [CommandState] = [.pending, .delivered, .succeeded, .failed, .expired, .cancelled]

    /// No further transition happens from a finished state.
    /// A state a later backplane added counts as finished: nothing here moves it on.
    public var isFinished: Bool { self != .pending && self != .delivered }
}

/// One command for one device, with its server UUID and its history.
public struct Command: Codable, Sendable, Equatable {
    public var commandId: String
    public var deviceId: String
    public var type: CommandType
    /// For `deleteAssets`.
    public var assetIds: [String]?
    public var state: CommandState
    public var createdAt: Date
    public var expiresAt: Date?
    public var deliveredAt: Date?
    public var completedAt: Date?
    /// The device's reason, for `failed` (and the last deferral).
    public var failureReason: String?
    /// How often the device answered "not now".
    public var deferrals: Int

    public init(
        commandId: String, deviceId: String, type: CommandType, assetIds: [String]? = nil, state: CommandState,
        createdAt: Date, expiresAt: Date? = nil, deliveredAt: Date? = nil, completedAt: Date? = nil,
        failureReason: String? = nil, deferrals: Int = 0
    ) {
        self.commandId = commandId
        self.deviceId = deviceId
        self.type = type
        self.assetIds = assetIds
        self.state = state
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.deliveredAt = deliveredAt
        self.completedAt = completedAt
        self.failureReason = failureReason
        self.deferrals = deferrals
    }
}

/// `POST /v1/admin/commands`: exactly one of `deviceId`, `externalDeviceId`, `userId` names the
/// target; `userId` enqueues one command per registered device of that user.
public struct EnqueueCommandRequest: Codable, Sendable, Equatable {
    public var type: CommandType
    public var deviceId: String?
    public var externalDeviceId: String?
    public var userId: String?
    /// Required for `deleteAssets`, refused for the other types.
    public var assetIds: [String]?
    /// After this the command expires if the device has not acknowledged it.
    public var expiresAt: Date?

    public init(
        type: CommandType, deviceId: String? = nil, externalDeviceId: String? = nil, userId: String? = nil,
        assetIds: [String]? = nil, expiresAt: Date? = nil
    ) {
        self.type = type
        self.deviceId = deviceId
        self.externalDeviceId = externalDeviceId
        self.userId = userId
        self.assetIds = assetIds
        self.expiresAt = expiresAt
    }
}

public struct CommandList: Codable, Sendable, Equatable {
    public var commands: [Command]

    public init(commands: [Command]) {
        self.commands = commands
    }
}

/// `GET /v1/admin/commands`: one page of the application's commands, newest first.
public struct CommandPage: Codable, Sendable, Equatable {
    public var commands: [Command]
    /// Pass as `cursor` to get the next (older) page; absent on the last page.
    public var nextCursor: String?

    public init(commands: [Command], nextCursor: String?) {
        self.commands = commands
        self.nextCursor = nextCursor
    }
}

/// A device's answer to a command, sent in the next sync.
public struct CommandAck: Codable, Sendable, Equatable {
    public struct Outcome: WireVocabulary {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        public static let succeeded = Outcome(rawValue: "succeeded")
        public static let failed = Outcome(rawValue: "failed")
        /// Not now (e.g. a file is playing); the command stays open and is sent again.
        public static let deferred = Outcome(rawValue: "deferred")
        public static let allCases: [Outcome] = [.succeeded, .failed, .deferred]
    }

    public var commandId: String
    public var outcome: Outcome
    public var reason: String?

    public init(commandId: String, outcome: Outcome, reason: String? = nil) {
        self.commandId = commandId
        self.outcome = outcome
        self.reason = reason
    }
}

/// The server's answer to one acknowledgement.
public struct CommandAckResult: Codable, Sendable, Equatable {
    public struct Status: WireVocabulary {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// Recorded.
        public static let accepted = Status(rawValue: "accepted")
        /// The command had already finished; nothing changed. Stop sending this ack.
        public static let duplicate = Status(rawValue: "duplicate")
        /// Not this device's command, or no such command; nothing changed. Stop sending this ack.
        public static let rejected = Status(rawValue: "rejected")
        public static let allCases: [Status] = [.accepted, .duplicate, .rejected]
    }

    public var commandId: String
    public var status: Status
    public var message: String?

    public init(commandId: String, status: Status, message: String? = nil) {
        self.commandId = commandId
        self.status = status
        self.message = message
    }
}

/// Why an asset's files were deleted on a device.
public struct AssetDeletionReason: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The SDK's own rules (expiry, quota).
    public static let `internal` = AssetDeletionReason(rawValue: "internal")
    /// A remote `deleteAssets` command.
    public static let remote = AssetDeletionReason(rawValue: "remote")
    /// The user deleted it.
    public static let user = AssetDeletionReason(rawValue: "user")
    /// Another user signed in on the device.
    public static let userChange = AssetDeletionReason(rawValue: "userChange")
    /// The download failed for good.
    public static let failedDownload = AssetDeletionReason(rawValue: "failedDownload")
    /// Everything was deleted: the app's delete-all or a remote wipe or kill.
    public static let deleteAll = AssetDeletionReason(rawValue: "deleteAll")
    public static let allCases: [AssetDeletionReason] = [.`internal`, .remote, .user, .userChange, .failedDownload, .deleteAll]
}
