import Foundation
import BackplaneWire

/// The remote command queue's admin side: enqueue (pending), cancel (pending → cancelled), and
/// the lists and counts. A command's life on the device side (pending → delivered → succeeded |
/// failed, its deferrals, and a refusal for an SDK that predates its type) is decided by the
/// sync (`SyncRules`), in the transaction that reads it; expiry (open → expired) by
/// `CommandExpiry`, applied by both and by the stores' sweep. The store applies each atomically.
public struct CommandService: Sendable {
    public let store: any BackplaneStore
    let wakeUps: any WakeUpPublisher
    /// Pushes the targeted devices that no channel reaches (`PushDispatcher`).
    let pushes: (any CommandPushes)?
    let metrics: BackplaneMetrics
    /// Which SDKs run which types: a command for a device whose SDK predates its type fails.
    let support: CommandSupport
    let now: @Sendable () -> Date

    public init(
        store: any BackplaneStore, wakeUps: any WakeUpPublisher, pushes: (any CommandPushes)? = nil, metrics: BackplaneMetrics = .none,
        support: CommandSupport = .current, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store
        self.support = support
        self.wakeUps = wakeUps
        self.pushes = pushes
        self.metrics = metrics
        self.now = now
    }

    /// Enqueues one command per target device and wakes them.
    public func enqueue(applicationId: String, _ request: EnqueueCommandRequest) async throws -> CommandList {
        let targets = [request.deviceId, request.externalDeviceId, request.userId].compactMap { $0 }
        guard targets.count == 1 else {
            throw ServiceError.validation("Name exactly one target: deviceId, externalDeviceId or userId.")
        }
        for (value, field) in [(request.deviceId, "deviceId"), (request.externalDeviceId, "externalDeviceId"), (request.userId, "userId")] {
            if let value { try Validate.identifier(value, field: field) }
        }
        let assetIds = try validateAssets(request)
        let now = now()
        try Validate.date(request.expiresAt, field: "expiresAt")
        if let expiresAt = request.expiresAt, expiresAt <= now {
            throw ServiceError.validation("'expiresAt' must be in the future.", field: "expiresAt")
        }

        let devices = try await targetDevices(applicationId: applicationId, request)
        let records = devices.map { device in
            support.refusing(
                CommandRecord(
                    commandId: UUID().uuidString.lowercased(), applicationId: applicationId, deviceId: device.deviceId,
                    type: request.type, assetIds: assetIds, state: .pending, createdAt: now, updatedAt: now,
                    expiresAt: request.expiresAt, deferrals: 0),
                onSDK: device.sdkVersion, now: now)
        }
        let stored = try await store.insertCommands(records)
        metrics.count(.enqueued, stored.count)
        // A device whose SDK cannot run the type has its command failed already: nothing to wake it for.
        let woken = devices.filter { support.supports(request.type, onSDK: $0.sdkVersion) }
        if !woken.isEmpty {
            wakeUps.publish(.devices(applicationId: applicationId, deviceIds: woken.map(\.deviceId)))
            pushes?.commandsEnqueued(applicationId: applicationId, devices: woken)
        }
        return CommandList(commands: stored.map(\.wire))
    }

    public func command(applicationId: String, commandId: String) async throws -> Command {
        guard let command = try await store.command(applicationId: applicationId, commandId: commandId) else {
            throw ServiceError.notFound("No command '\(commandId)'.")
        }
        return command.wire
    }

    /// A device's commands, oldest first. Open commands past their expiry are shown as expired.
    public func commands(applicationId: String, deviceId: String) async throws -> CommandList {
        guard try await store.device(applicationId: applicationId, deviceId: deviceId) != nil else {
            throw ServiceError.notFound("No device '\(deviceId)'.")
        }
        let now = now()
        let commands = try await store.commands(applicationId: applicationId, deviceId: deviceId)
        return CommandList(commands: commands.map { CommandExpiry.applied(to: $0, now: now).wire })
    }

    /// A page of the application's commands, newest first. The state filter is served by an
    /// index of stored states; an open command past its expiry is shown as expired (the store
    /// marks it so at the device's next sync), and so is left out of a `pending` or `delivered`
    /// page, which can then be shorter than `limit` with a `nextCursor` all the same.
    public func list(applicationId: String, filter: CommandFilter, cursor: String?, limit: Int?) async throws -> CommandPage {
        let limit = try Validate.pageLimit(limit, default: WireLimits.defaultPageSize, max: WireLimits.maxPageSize)
        if let deviceId = filter.deviceId { try Validate.identifier(deviceId, field: "deviceId") }
        let before = try cursor.map(RowIdCursor.command.decode)
        // One extra row tells whether another page exists.
        let rows = try await store.commands(applicationId: applicationId, filter: filter, beforeRowId: before, limit: limit + 1)
        let page = rows.prefix(limit)
        let now = now()
        let shown = page.map { CommandExpiry.applied(to: $0, now: now) }.filter { filter.state == nil || $0.state == filter.state }
        let next = rows.count > limit ? page.last?.rowId.map(RowIdCursor.command.encode) : nil
        return CommandPage(commands: shown.map(\.wire), nextCursor: next)
    }

    /// How many of the application's commands are in each state, with expiry applied as in every
    /// other answer (an open command past its `expiresAt` is expired).
    public func counts(applicationId: String) async throws -> [CommandState: Int] {
        try await store.commandCounts(applicationId: applicationId, at: now())
    }

    /// Cancels a command that was not delivered yet; a delivered or finished one is a 409.
    public func cancel(applicationId: String, commandId: String) async throws -> Command {
        let now = now()
        let updated = try await store.updateCommand(applicationId: applicationId, commandId: commandId) { command in
            // One past its expiry is expired, swept or not: too late to cancel.
            var command = CommandExpiry.applied(to: command, now: now)
            guard command.state == .pending else {
                throw ServiceError.conflict("Command '\(commandId)' is \(command.state.rawValue); only a pending command can be cancelled.")
            }
            command.state = .cancelled
            command.completedAt = now
            command.updatedAt = now
            return command
        }
        guard let updated else { throw ServiceError.notFound("No command '\(commandId)'.") }
        metrics.count(.cancelled)
        return updated.wire
    }

    /// Counted once the store has applied them: a transaction retried or rolled back counts nothing.
    func countTransitions(acks: [CommandAck], results: [CommandAckResult], open: [CommandRecord], now: Date) {
        // One result per ack, in order: a command acknowledged twice in one sync counts once.
        for (ack, result) in zip(acks, results) where result.status == .accepted {
            switch ack.outcome {
            case .succeeded: metrics.count(.succeeded)
            case .failed: metrics.count(.failed)
            case .deferred: metrics.count(.deferred)
            default: break  // (the request's decoder refused any other outcome)
            }
        }
        metrics.count(.delivered, open.filter { $0.state == .delivered && $0.deliveredAt == now }.count)
    }

    private func validateAssets(_ request: EnqueueCommandRequest) throws -> [String]? {
        guard request.type == .deleteAssets else {
            guard request.assetIds == nil else {
                throw ServiceError.validation("'assetIds' is only for deleteAssets.", field: "assetIds")
            }
            return nil
        }
        guard let assetIds = request.assetIds, !assetIds.isEmpty else {
            throw ServiceError.validation("deleteAssets needs a non-empty 'assetIds'.", field: "assetIds")
        }
        guard assetIds.count <= WireLimits.maxAssetIdsPerCommand else {
            throw ServiceError.validation("At most \(WireLimits.maxAssetIdsPerCommand) asset ids per command.", field: "assetIds")
        }
        for assetId in assetIds { try Validate.identifier(assetId, field: "assetIds") }
        return assetIds
    }

    private func targetDevices(applicationId: String, _ request: EnqueueCommandRequest) async throws -> [DeviceRecord] {
        var devices: [DeviceRecord]
        if let deviceId = request.deviceId {
            devices = try await store.device(applicationId: applicationId, deviceId: deviceId).map { [$0] } ?? []
        } else if let userId = request.userId {
            devices = try await store.devices(applicationId: applicationId, userId: userId)
        } else {
            devices = try await store.devices(
                applicationId: applicationId, filter: DeviceFilter(externalDeviceId: request.externalDeviceId),
                afterRowId: nil, limit: WireLimits.maxPageSize)
        }
        devices = devices.filter(\.isRegistered)
        guard !devices.isEmpty else {
            throw ServiceError.notFound("No registered device matches the target.")
        }
        return devices
    }
}

extension CommandRecord {
    var wire: Command {
        Command(
            commandId: commandId, deviceId: deviceId, type: type, assetIds: assetIds, state: state, createdAt: createdAt,
            expiresAt: expiresAt, deliveredAt: deliveredAt, completedAt: completedAt, failureReason: failureReason,
            deferrals: deferrals)
    }
}
