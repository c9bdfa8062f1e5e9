import Foundation
import BackplaneWire
import Testing
import TestSupport

/// A protected download's license through its life, driven by the built harness against the
/// built backplane: one copy per account holds the second device back until the first deletes
/// and its release lands; a sync renews the license; a wipe ends it once the device has wiped.
extension HarnessEndToEndTests {
    @Test func aLicenseIsCountedReleasedRenewedAndEndedThroughTheHarness() async throws {
        guard let packager = try await ClearKeyDownloadTests.toolsAreInstalled() else { return }
        let root = try createdTemporaryDirectory("backplane-license-life")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        try await backplane.admin("PATCH", "/v1/admin/settings", body: #"{"maxCopiesPerAccount": 1}"#)
        let key = try JSONDecoder.wire.decode(GeneratedContentKey.self, from: try await backplane.admin("POST", "/v1/admin/assets/film/keys"))
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        _ = try await ClearKeyDownloadTests.packageClip(packager, key: key, in: root, serving: "/film", from: origin)
        let harness = try backplane.harness(user: "ann")
        let download = ["download", "--asset-id", "film", "--url", origin.url("/film/manifest.mpd").absoluteString, "--dash", "--wait"]
        func licenses(_ deviceId: String) async throws -> [License] {
            try JSONDecoder.wire.decode(LicenseList.self, from: try await backplane.admin("GET", "/v1/admin/devices/\(deviceId)/licenses")).licenses
        }

        let phone = try await harness.register(device: "phone")
        let tablet = try await harness.register(device: "tablet")
        let first = try await harness.run(download, device: "phone")
        #expect(first.status == 0, "\(first.json)")
        let held = try #require(try await licenses(phone).first)
        #expect(held.state == "outstanding" && held.kids == [key.kid])

        // One copy per account: the tablet is refused while the phone holds the film.
        let refused = try await harness.run(download, device: "tablet")
        #expect(refused.status != 0 && "\(refused.json)".contains("copies"), "\(refused.json)")
        #expect(try await licenses(tablet).isEmpty)

        // A sync renews the phone's license.
        #expect(try await harness.run(["sync"], device: "phone").status == 0)
        let renewed = try #require(try await licenses(phone).first)
        #expect(renewed.renewedAt != nil, "\(renewed)")

        // The phone deletes the film; its release lands (at once, or with its next sync), and
        // the copy is free for the tablet.
        #expect(try await harness.run(["remove", "--asset-id", "film"], device: "phone").status == 0)
        _ = try await harness.run(["sync"], device: "phone")
        #expect(try await licenses(phone).map(\.state) == ["released"])
        let retried = try await harness.run(download, device: "tablet")
        #expect(retried.status == 0, "\(retried.json)")
        #expect(try await licenses(tablet).map(\.state) == ["outstanding"])

        // A wipe: outstanding until the tablet has wiped (its acknowledgement), then ended with
        // its grant in that transaction, without a release of its own.
        try await backplane.admin("POST", "/v1/admin/commands", body: #"{"type": "wipe", "deviceId": "\#(tablet)"}"#)
        #expect(try await licenses(tablet).map(\.state) == ["outstanding"])
        _ = try await harness.run(["sync"], device: "tablet")
        #expect(try await licenses(tablet).map(\.state) == ["released"])
    }
}
