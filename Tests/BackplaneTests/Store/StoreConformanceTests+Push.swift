@testable import Backplane
import Foundation
import BackplaneWire
import Testing

/// Push credentials and the per-device push claim, on every store.
extension StoreConformanceTests {
    @Test(arguments: StoreKind.allCases)
    func pushCredentialsAreKeptPerProviderAndMarkedBrokenOnlyAsSet(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        let apns = PushCredentialsRecord(applicationId: applicationId, provider: .apns, secret: #"{"k":"apns"}"#, setAt: Self.now)
        let fcm = PushCredentialsRecord(applicationId: applicationId, provider: .fcm, secret: #"{"k":"fcm"}"#, setAt: Self.now)
        try await store.setPushCredentials(apns)
        try await store.setPushCredentials(fcm)
        #expect(try await store.pushCredentials(applicationId: applicationId) == [apns, fcm])

        let broken = PushCredentialsBroken(since: Self.now.addingTimeInterval(5), reason: "InvalidProviderToken")
        // A refusal of credentials replaced since does not mark the new ones.
        #expect(try await !store.markPushCredentialsBroken(applicationId: applicationId, provider: .apns, setAt: Self.now - 1, broken: broken))
        #expect(try await store.markPushCredentialsBroken(applicationId: applicationId, provider: .apns, setAt: Self.now, broken: broken))
        #expect(try await store.pushCredentials(applicationId: applicationId).first?.broken == broken)
        // Setting them again clears the mark.
        var replaced = apns
        replaced.setAt = Self.now.addingTimeInterval(10)
        try await store.setPushCredentials(replaced)
        #expect(try await store.pushCredentials(applicationId: applicationId) == [replaced, fcm])
        #expect(try await store.deletePushCredentials(applicationId: applicationId, provider: .apns))
        #expect(try await !store.deletePushCredentials(applicationId: applicationId, provider: .apns))
        #expect(try await store.pushCredentials(applicationId: applicationId) == [fcm])
    }

    @Test(arguments: StoreKind.allCases)
    func oneClaimPerDeviceWithinTheSpacingEvenAtOnce(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        #expect(try await store.claimPush(applicationId: applicationId, deviceId: "phone", now: Self.now, spacing: .seconds(30)) == .granted)
        let soon = Self.now.addingTimeInterval(29)
        #expect(try await store.claimPush(applicationId: applicationId, deviceId: "phone", now: soon, spacing: .seconds(30))
            == .refused(lastPushAt: Self.now))
        // Another device has its own spacing.
        #expect(try await store.claimPush(applicationId: applicationId, deviceId: "tablet", now: soon, spacing: .seconds(30)) == .granted)
        // Sixteen claims at once, once the spacing is over: one is granted.
        let later = Self.now.addingTimeInterval(30)
        let granted = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<16 {
                group.addTask { try await store.claimPush(applicationId: applicationId, deviceId: "phone", now: later, spacing: .seconds(30)) == .granted }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(granted == 1)
    }
}
