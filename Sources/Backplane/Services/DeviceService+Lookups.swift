import Foundation
import BackplaneWire

/// The device reads the admin console makes, as calls of the service (the console reaches the
/// store through services only; `scripts/check-architecture`). Each device comes with its latest
/// last-seen time (`LastSeenLog`), as every answer about a device does.
extension DeviceService {
    /// The application's devices in numbers: registered, download-enabled, and seen in the last hour.
    public func fleetSummary(applicationId: String) async throws -> FleetSummary {
        try await store.fleetSummary(applicationId: applicationId, seenSince: now().addingTimeInterval(-3600))
    }

    /// A user's devices (registered or not): bounded by what registration allows, read whole.
    public func devices(applicationId: String, userId: String) async throws -> [DeviceRecord] {
        try await store.devices(applicationId: applicationId, userId: userId).map(lastSeen.latest)
    }

    /// What one search box finds for text someone read out: the device with that id, the user's
    /// devices, and the devices with that external id or nickname, each matched exactly through
    /// its index, at most `limit` per lookup.
    public func find(applicationId: String, query: String, limit: Int = WireLimits.defaultPageSize) async throws -> DeviceSearch {
        try Validate.identifier(query, field: "q")
        var found: [DeviceRecord] = []
        if let device = try await store.device(applicationId: applicationId, deviceId: query) { found.append(device) }
        var search = DeviceSearch()
        for filter in [DeviceFilter(userId: query), DeviceFilter(externalDeviceId: query), DeviceFilter(nickname: query)] {
            var filter = filter
            filter.includeUnregistered = true
            let page = try await store.devices(applicationId: applicationId, filter: filter, afterRowId: nil, limit: limit + 1)
            search.truncated = search.truncated || page.count > limit
            if filter.userId != nil { search.userHasDevices = !page.isEmpty }
            found += page.prefix(limit)
        }
        var seen = Set<String>()
        search.devices = found.filter { seen.insert($0.deviceId).inserted }.map(lastSeen.latest)
        return search
    }
}

/// What `DeviceService.find` found.
public struct DeviceSearch: Sendable {
    /// Each device once, in the order of the lookups (id, user, external id, nickname).
    public var devices: [DeviceRecord] = []
    /// The text is a user id with devices.
    public var userHasDevices = false
    /// A lookup found more than its page: only its first page is in `devices`.
    public var truncated = false
}
