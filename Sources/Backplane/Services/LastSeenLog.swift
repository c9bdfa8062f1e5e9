import Foundation
import NIOConcurrencyHelpers

/// When each device last made a signed request, kept in memory and written to the store in
/// batches (`LastSeenWriter`), so that a request that changes nothing else writes nothing.
///
/// A crash loses at most the times noted since the last batch that was written (the writer's
/// interval, a few seconds, while writes succeed); nothing else depends on them. This server's
/// answers show the newer of the stored time and the one noted here, so a device and an admin
/// see the same time before the batch is written as after; another process reading the
/// database (the admin commands) sees the stored time. One race is left: a device read from the
/// store just before its batch commits and merged here just after the batch is forgotten shows
/// the time before the batch, in that one answer (`CredentialUseLog` avoids it by taking its
/// copy before the read, which here would copy every device noted for each answer).
public final class LastSeenLog: Sendable {
    private struct Times {
        var noted: [DeviceKey: Date] = [:]
        /// The batch being written: answers keep showing its times until the store has them.
        var writing: [DeviceKey: Date] = [:]
    }

    /// One lock for both: a batch moves from `noted` to `writing` at once, never in neither.
    private let times = NIOLockedValueBox(Times())

    public init() {}

    func saw(applicationId: String, deviceId: String, at time: Date) {
        let key = DeviceKey(applicationId: applicationId, deviceId: deviceId)
        times.withLockedValue { times in
            if let earlier = times.noted[key], earlier >= time { return }
            times.noted[key] = time
        }
    }

    /// The device as the store has it, with the last-seen time noted since the last batch.
    func latest(_ device: DeviceRecord) -> DeviceRecord {
        let key = DeviceKey(applicationId: device.applicationId, deviceId: device.deviceId)
        // Every answer about a device comes here: no allocation on the way.
        let time = times.withLockedValue { max($0.noted[key] ?? .distantPast, $0.writing[key] ?? .distantPast) }
        guard time > device.lastSeenAt else { return device }
        var device = device
        device.lastSeenAt = time
        return device
    }

    /// Writes what was noted, `chunkSize` devices per write so that no write holds up the
    /// requests behind it for long. On failure the times go back (unless a newer one came
    /// meanwhile) for the next batch. Returns how many devices were written.
    @discardableResult
    public func flush(to store: any DeviceStore) async throws -> Int {
        // Taken out whole: requests noting times meanwhile do not copy or wait for the batch.
        let batch = times.withLockedValue { times in
            times.writing = times.noted
            times.noted = [:]
            return times.writing
        }
        defer { times.withLockedValue { $0.writing = [:] } }
        let sightings = batch.map { DeviceSighting(applicationId: $0.key.applicationId, deviceId: $0.key.deviceId, at: $0.value) }
        var written = 0
        do {
            while written < sightings.count {
                let chunk = Array(sightings[written..<min(written + Self.chunkSize, sightings.count)])
                try await store.recordLastSeen(chunk)
                written += chunk.count
            }
        } catch {
            times.withLockedValue { times in
                for sighting in sightings[written...] {
                    let key = DeviceKey(applicationId: sighting.applicationId, deviceId: sighting.deviceId)
                    if let newer = times.noted[key], newer >= sighting.at { continue }
                    times.noted[key] = sighting.at
                }
            }
            throw error
        }
        return written
    }

    static let chunkSize = 500

    private struct DeviceKey: Hashable {
        let applicationId: String
        let deviceId: String
    }
}
