import Backplane
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// A server and the admin commands open the same database: what one process changes, the other
/// sees, even where the server keeps recent reads (`RecentReads`).
@Suite struct SharedDatabaseTests {
    @Test func aKeyRevokedAndSettingsChangedByAnotherProcessTakeEffectWithinASecond() async throws {
        let directory = temporaryDirectory("backplane-shared-db")
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try SQLiteStore(directory: directory)
        let applications = ApplicationService(store: server, wakeUps: WakeUpHub())
        let (application, key) = try await applications.createApplication(name: "shared")
        let spare = try await applications.addAppKey(applicationId: application.id)
        #expect(try await server.appKey(id: key.keyId)?.revokedAt == nil)
        #expect(try await server.application(id: application.id)?.settings.deviceLimit != 1)

        // The admin command's process: its own store on the same file.
        let admin = ApplicationService(store: try SQLiteStore(directory: directory), wakeUps: WakeUpHub())
        _ = try await admin.revokeAppKey(applicationId: application.id, keyId: key.keyId)
        _ = try await admin.updateSettings(applicationId: application.id, ApplicationSettingsUpdate { $0.deviceLimit = 1 })

        try await Task.sleep(for: .milliseconds(1100))
        #expect(try await server.appKey(id: key.keyId)?.revokedAt != nil)
        #expect(try await server.application(id: application.id)?.settings.deviceLimit == 1)
        #expect(try await server.appKey(id: spare.keyId)?.revokedAt == nil)
    }

    /// Changes through the server's own store are seen at once.
    @Test func theServersOwnChangesAreSeenAtOnce() async throws {
        let directory = temporaryDirectory("backplane-shared-db")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(directory: directory)
        let applications = ApplicationService(store: store, wakeUps: WakeUpHub())
        let (application, key) = try await applications.createApplication(name: "own")
        _ = try await applications.addAppKey(applicationId: application.id)
        #expect(try await store.appKey(id: key.keyId)?.revokedAt == nil)
        #expect(try await store.application(id: application.id)?.settings.deviceLimit != 1)
        _ = try await applications.revokeAppKey(applicationId: application.id, keyId: key.keyId)
        _ = try await applications.updateSettings(applicationId: application.id, ApplicationSettingsUpdate { $0.deviceLimit = 1 })
        #expect(try await store.appKey(id: key.keyId)?.revokedAt != nil)
        #expect(try await store.application(id: application.id)?.settings.deviceLimit == 1)
    }
}
