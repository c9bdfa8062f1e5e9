import Foundation
import NIOConcurrencyHelpers

/// When each device last made a signed request, kept in memory and written to the store in
/// batches (`LastSeenWriter`), so that a request that changes nothing else writes nothing.
///
/// A crash loses at most the times noted since the last batch (the writer's interval, a few
/// seconds); nothing else depends on them. Answers built from the store show the newer of the
/// stored time and the one noted here, so a device and an admin see the same time before the
/// batch is written as after.
public final class LastSeenLog: Sendable {
    private let noted = NIOLockedValueBox<[DeviceKey: Date]>([:])

    public init() {}

    func saw(applicationId: String, deviceId: String, at time: Date) {
        let key = DeviceKey(applicationId: applicationId, deviceId: deviceId)
        noted.withLockedValue { noted in
            if let earlier = noted[key], earlier >= time { return }
            noted[key] = time
        }
    }

    /// The device as the store has it, with the last-seen time noted since the last batch.
    func latest(_ device: DeviceRecord) -> DeviceRecord {
        let key = DeviceKey(applicationId: device.applicationId, deviceId: device.deviceId)
        guard let time = noted.withLockedValue({ $0[key] }), time > device.lastSeenAt else { return device }
        var device = device
        device.lastSeenAt = time
        return device
    }

    /// Writes what was noted in one transaction. On failure the times are noted again (unless a
    /// newer one came meanwhile) for the next batch. Returns how many devices were written.
    @discardableResult
    public func flush(to store: any DeviceStore) async throws -> Int {
        let batch = noted.withLockedValue { $0 }
        guard !batch.isEmpty else { return 0 }
        try await store.recordLastSeen(batch.map { DeviceSighting(applicationId: $0.key.applicationId, deviceId: $0.key.deviceId, at: $0.value) })
        // Only what was written is dropped: a time noted during the write stays for the next batch.
        noted.withLockedValue { noted in
            for (key, time) in batch where noted[key] == time { noted[key] = nil }
        }
        return batch.count
    }

    var pendingCount: Int { noted.withLockedValue(\.count) }

    private struct DeviceKey: Hashable {
        let applicationId: String
        let deviceId: String
    }
}
