import Backplane
import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing
import TestSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite struct DurabilityTests {
    /// Register over a real socket, stop the server, open the same data directory in a new
    /// store and server: the device, its state and its credential are all still there.
    @Test func registeredDeviceSurvivesARestart() async throws {
        let fixture = try await Fixture.make(deviceLimit: 1)
        defer { try? FileManager.default.removeItem(at: fixture.directory) }

        let identities = Box<(DeviceIdentity, DeviceIdentity)>()
        try await fixture.application().test(.live) { raw in
            let client = Client(raw: raw, fixture: fixture)
            let (first, _) = try await client.register(user: "alice", device: "phone", external: "crm-1")
            _ = try await client.device(.patch, "/v1/devices/phone", json: DeviceProfileUpdate(nickname: "Alice's phone"), as: first)
            let (second, body) = try await client.register(user: "alice", device: "tablet")
            #expect(body.device.downloadEnabled == false)
            identities.value = (first, second)
        }
        let (phone, tablet) = try #require(identities.value)

        let restarted = try fixture.restarted()
        try await restarted.application().test(.live) { raw in
            let client = Client(raw: raw, fixture: restarted)
            let device = try await client.device(.get, "/v1/devices/phone", as: phone).decode(DeviceResponse.self).device
            #expect(device.nickname == "Alice's phone")
            #expect(device.externalDeviceId == "crm-1")
            #expect(device.downloadEnabled)
            // The limit still counts the phone: the tablet cannot be enabled.
            let refused = try await client.device(
                .put, "/v1/devices/tablet/download-enabled", json: DownloadEnabledRequest(downloadEnabled: true), as: tablet)
            #expect(refused.errorCode == .deviceLimitReached)
            let settings = try await client.admin(.get, "/v1/admin/settings").decode(SettingsResponse.self).settings
            #expect(settings.deviceLimit == 1)
        }
    }
}

/// Carries a value out of a `@Sendable` test closure.
extension DurabilityTests {
    /// Registrations arrive many at once, so they share commits (group commit); the server is
    /// killed with SIGKILL in the middle. Every registration it answered is in the database
    /// afterwards, and no user is over the device limit.
    @Test func everyAcknowledgedRegistrationSurvivesAKillUnderLoad() async throws {
        let dataDir = temporaryDirectory("backplane-kill-load")
        defer { try? FileManager.default.removeItem(at: dataDir) }
        let served = try await ServedProcess.start(dataDir)
        let server = served.process, port = served.port, signer = served.signer
        defer { server.terminate() }
        let applicationId = try #require(FirstRunOutput.value(after: "application id :", in: served.banner))

        let total = 400
        let acknowledged = Box<[String: String]>()
        acknowledged.value = [:]
        let session = URLSession(configuration: .ephemeral)
        // At most 32 requests in flight: enough for registrations to share commits, and few
        // enough that the server cannot answer the whole load before the kill lands (with all 400
        // sent at once, a test process starved by the rest of the suite read the 60th answer
        // only after the server had answered every request).
        let inFlight = 32
        @Sendable func register(_ index: Int) async {
            let body = try! Client.encode(RegisterDeviceRequest(userId: "user-\(index % 40)", deviceId: "device-\(index)", platform: "linux"))
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/v1/devices/register")!)
            request.httpMethod = "POST"
            request.httpBody = body
            for field in signer.headers(method: .post, path: "/v1/devices/register", body: body) {
                request.setValue(field.value, forHTTPHeaderField: field.name.rawName)
            }
            // A request the kill cut off was not acknowledged: it may or may not be stored.
            guard let (data, response) = try? await session.data(for: request),
                  (response as? HTTPURLResponse)?.statusCode == 201,
                  let answer = try? WireJSON.decoder().decode(RegisterDeviceResponse.self, from: data)
            else { return }
            let count = acknowledged.update { $0[answer.device.deviceId] = answer.device.userId; return $0.count }
            if count == 60 { server.signal(SIGKILL) }
        }
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<total {
                if index >= inFlight { await group.next() }
                group.addTask { await register(index) }
            }
        }
        _ = try await server.waitForExit(timeout: .seconds(30))
        let answered = try #require(acknowledged.value)
        #expect(answered.count >= 60 && answered.count < total, "the kill did not land in the middle of the load: \(answered.count) of \(total)")

        let store = try SQLiteStore(directory: dataDir)
        let limit = try #require(try await store.applications().first { $0.id == applicationId }).settings.deviceLimit
        var enabledPerUser: [String: Int] = [:]
        for (deviceId, userId) in answered {
            let device = try await store.device(applicationId: applicationId, deviceId: deviceId)
            #expect(device?.userId == userId, "acknowledged registration of \(deviceId) was lost")
        }
        for user in 0..<40 {
            let devices = try await store.devices(applicationId: applicationId, userId: "user-\(user)")
            enabledPerUser["user-\(user)"] = devices.filter(\.downloadEnabled).count
        }
        #expect(limit < 0 || enabledPerUser.values.allSatisfy { $0 <= limit }, "\(enabledPerUser)")
    }
}

final class Box<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value?
    var value: Value? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }

    /// Changes the value under the lock and returns what `change` returns.
    func update<R>(_ change: (inout Value) -> R) -> R {
        lock.withLock { change(&stored!) }
    }
}
