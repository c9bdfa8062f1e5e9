import Foundation

/// What the backplane can ask one device to do.
public enum CommandType: String, Codable, Sendable, CaseIterable {
    /// Delete every downloaded asset and its files.
    case wipe
    /// Delete the assets listed in `assetIds`.
    case deleteAssets
    /// Wipe, unregister, and forget the device credential.
    case kill
    /// Unregister the device (it stops downloading and syncing).
    case unregister
    /// Sync again now (nothing else).
    case syncNow
}

/// pending → delivered → succeeded | failed | expired; pending → cancelled.
public enum CommandState: String, Codable, Sendable, CaseIterable {
    /// Enqueued, not yet handed to the device.
    case pending
    /// Handed to the device in a sync answer; waiting for its acknowledgement.
    case delivered
    case succeeded
    /// The device reported it could not do it (`failureReason`).
    case failed
    /// Its `expiresAt` passed before the device acknowledged it.
    case expired
    /// An admin cancelled it before delivery.
    case cancelled

    /// No further transition happens from a finished state.
    public var isFinished: Bool {
        switch self {
        case .pending, .delivered: false
        case .succeeded, .failed, .expired, .cancelled: true
        }
    }
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
    public enum Outcome: String, Codable, Sendable {
        case succeeded
        case failed
        /// Not now (e.g. a file is playing); the command stays open and is sent again.
        case deferred
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
    public enum Status: String, Codable, Sendable {
        /// Recorded.
        case accepted
        /// The command had already finished; nothing changed. Stop sending this ack.
        case duplicate
        /// Not this device's command, or no such command; nothing changed. Stop sending this ack.
        case rejected
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
public enum AssetDeletionReason: String, Codable, Sendable, CaseIterable {
    /// The SDK's own rules (expiry, quota).
    case `internal`
    /// A remote `deleteAssets` command.
    case remote
    /// The user deleted it.
    case user
    /// Another user signed in on the device.
    case userChange
    /// The download failed for good.
    case failedDownload
    /// Everything was deleted: the app's delete-all or a remote wipe or kill.
    case deleteAll
}
