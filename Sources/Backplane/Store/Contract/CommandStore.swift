import Foundation
import BackplaneWire

/// The command queue. Open states are `pending` and `delivered`; a finished command never changes.
public protocol CommandStore: Sendable {
    func insertCommands(_ commands: [CommandRecord]) async throws -> [CommandRecord]
    func command(applicationId: String, commandId: String) async throws -> CommandRecord?
    /// A device's commands in delivery order.
    func commands(applicationId: String, deviceId: String) async throws -> [CommandRecord]
    /// A page of the application's commands matching `filter`, newest first, with `rowId` below
    /// `beforeRowId`. Each combination of filters is served by an index in page order.
    func commands(applicationId: String, filter: CommandFilter, beforeRowId: Int64?, limit: Int) async throws -> [CommandRecord]
    /// Marks at most `limit` open commands of any application whose `expiresAt` is at or before
    /// `now` as expired (`completedAt` their expiry), in one transaction; returns how many. A
    /// command being acknowledged or cancelled meanwhile keeps that outcome.
    func expireCommands(at now: Date, limit: Int) async throws -> Int
    /// How many of the application's commands are in each state (absent: none), an open command
    /// whose expiry is at or before `now` counted as expired, as the API shows it.
    func commandCounts(applicationId: String, at now: Date) async throws -> [CommandState: Int]
    /// Replaces a command with what `change` returns, in one transaction. Nil when there is none.
    func updateCommand(
        applicationId: String, commandId: String, _ change: @escaping @Sendable (CommandRecord) throws -> CommandRecord
    ) async throws -> CommandRecord?
}

public struct CommandRecord: Sendable, Equatable, Codable {
    /// Store-assigned, increasing: the delivery order. Nil before the first insert.
    public var rowId: Int64?
    public var commandId: String
    public var applicationId: String
    public var deviceId: String
    public var type: CommandType
    public var assetIds: [String]?
    public var state: CommandState
    public var createdAt: Date
    public var updatedAt: Date
    public var expiresAt: Date?
    public var deliveredAt: Date?
    public var completedAt: Date?
    public var failureReason: String?
    public var deferrals: Int

    public init(
        rowId: Int64? = nil, commandId: String, applicationId: String, deviceId: String, type: CommandType, assetIds: [String]? = nil,
        state: CommandState, createdAt: Date, updatedAt: Date, expiresAt: Date? = nil, deliveredAt: Date? = nil, completedAt: Date? = nil,
        failureReason: String? = nil, deferrals: Int = 0
    ) {
        self.rowId = rowId
        self.commandId = commandId
        self.applicationId = applicationId
        self.deviceId = deviceId
        self.type = type
        self.assetIds = assetIds
        self.state = state
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.expiresAt = expiresAt
        self.deliveredAt = deliveredAt
        self.completedAt = completedAt
        self.failureReason = failureReason
        self.deferrals = deferrals
    }
}

extension CommandState {
    /// Stored state names with their counts (`commandCounts`, in either store); a name this
    /// version does not know is left out.
    static func counts(_ rows: [(String, Int)]) -> [CommandState: Int] {
        Dictionary(rows.compactMap { name, count in CommandState.known(name).map { ($0, count) } }, uniquingKeysWith: +)
    }
}

/// Which commands a command list shows; nil fields match everything.
public struct CommandFilter: Sendable, Equatable {
    public var deviceId: String?
    public var state: CommandState?
    public var type: CommandType?

    public init(deviceId: String? = nil, state: CommandState? = nil, type: CommandType? = nil) {
        self.deviceId = deviceId
        self.state = state
        self.type = type
    }
}
