import Foundation
import PostgresNIO
import BackplaneWire

/// What every signed request asks of the database, in groups (`CallGroups`): the sign-in read of
/// the device and its open commands, and spending the request's nonce. A transaction that spends
/// a nonce with its writes (a sync that changes something, an event batch) spends it alone, in
/// that transaction (`record`).
extension PostgresStore {
    public func deviceWithOpenCommands(applicationId: String, deviceId: String) async throws -> (DeviceRecord, [CommandRecord])? {
        try await signInReads.call(DeviceKey(applicationId: applicationId, deviceId: deviceId)) { [weak self] devices in
            guard let self else { throw StoreUnavailableError("the store has closed") }
            return try await self.devicesWithOpenCommands(devices)
        }
    }

    /// One statement for the group; an unknown device is nil.
    private func devicesWithOpenCommands(_ devices: [DeviceKey]) async throws -> [(DeviceRecord, [CommandRecord])?] {
        let rows = try await connection { [logger] connection in
            try await connection.prepared(PreparedStatements.DevicesWithOpenCommands(devices: devices), logger: logger)
        }
        var found = [(DeviceRecord, [CommandRecord])?](repeating: nil, count: devices.count)
        for (position, device, command) in rows {
            // Positions come from the statement's ordinality over the group's own array.
            guard (1...devices.count).contains(position) else { throw CallGroupMismatch(inputs: devices.count, outputs: position) }
            if found[position - 1] == nil { found[position - 1] = (device, []) }
            if let command { found[position - 1]?.1.append(command) }
        }
        return found
    }

    public func recordSignedRequest(_ request: SignedRequestRecord) async throws -> Bool {
        let spending = try await nonceSpends.call(request) { [weak self] requests in
            guard let self else { throw StoreUnavailableError("the store has closed") }
            return try await self.spend(requests)
        }
        return try PreparedStatements.SpendNonces.spentNow(request, floor: spending.floor, spent: spending.spent)
    }

    /// One statement for the group. A nonce named twice in one group is spent by the first of
    /// its requests; the others are replays.
    ///
    /// The nonces are inserted in one order, (key id, nonce) byte by byte: an insert waits for an
    /// uncommitted insert of the same nonce, so two nodes' groups sharing two nonces in opposite
    /// orders would deadlock. (Both are ASCII, checked at sign-in, where `String`'s order is the
    /// bytes', as `COLLATE "C"` compares them.) A deadlock or serialization failure all the same
    /// runs the group again, as `transaction` does.
    private func spend(_ requests: [SignedRequestRecord]) async throws -> [(floor: Int64?, spent: Bool)] {
        let ordered = Dictionary(requests.map { (NonceKey($0), $0) }, uniquingKeysWith: { first, _ in first })
            .sorted { $0.key < $1.key }.map(\.value)
        let rows = try await Self.retryingConflicts { [self] in
            try await connection { [logger] connection in
                try await connection.prepared(PreparedStatements.SpendNonces(requests: ordered), logger: logger)
            }
        }
        var (floor, spent) = PreparedStatements.SpendNonces.answer(rows)
        // The first request naming a nonce takes it; any later one in the group is a replay.
        return requests.map { (floor, spent.remove(NonceKey($0)) != nil) }
    }
}
