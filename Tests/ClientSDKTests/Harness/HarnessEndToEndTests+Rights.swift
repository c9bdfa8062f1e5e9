import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// Download permissions and playback rights through the built harness and server: part of the
/// serialized end-to-end suite, so that its processes do not compete with the others'.
extension HarnessEndToEndTests {
    @Test func theHarnessShowsPermissionsAndRecordsPlays() async throws {
        let root = temporaryDirectory("backplane-harness-rights")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        try await backplane.admin("PATCH", "/v1/admin/settings", body: #"{"maxDownloadsPerAccount": 1, "expiryAfterPlaySeconds": 3600}"#)
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        for name in ["film", "second"] { origin.serve("/\(name).mp4", TestOrigin.content(20_000)) }
        let harness = try backplane.harness(user: "viewer")

        let film = try await harness.run(
            ["download", "--asset-id", "film", "--url", origin.url("/film.mp4").absoluteString, "--wait"], device: "phone")
        #expect(film.status == 0, "\(film.json)")
        #expect(film.json["state"] == .string("completed"))
        #expect(film.json["permission"] == .string("granted"))
        #expect(film.json["grantId"]?.stringValue?.isEmpty == false)

        // The account holds its one download: the second is denied, with the rule and counts.
        let second = try await harness.run(
            ["download", "--asset-id", "second", "--url", origin.url("/second.mp4").absoluteString, "--wait"], device: "phone")
        #expect(second.status == 11, "\(second.json)")
        #expect(second.json["state"] == .string("blocked") && second.json["blockedBy"] == .string("permissionDenied"))
        guard case .object(let denial) = second.json["denial"] else {
            Issue.record("no denial: \(second.json)")
            return
        }
        #expect(denial["rule"] == .string("account") && denial["permanent"] == .bool(false))
        #expect(origin.requests("/second.mp4") == 0)

        // Rights before and after the first play (the expiry after play starts then).
        let before = try await harness.run(["rights", "film"], device: "phone")
        #expect(before.status == 0 && before.json["rights"] == .string("valid") && before.json["until"] == nil, "\(before.json)")
        let play = try await harness.run(["play", "film", "--watched", "12"], device: "phone")
        #expect(play.status == 0 && play.json["rights"] == .string("valid"), "\(play.json)")
        guard case .string(let until) = play.json["until"], case .string(let now) = play.json["trustedTime"],
              let untilDate = ISO8601DateFormatter().date(from: until), let nowDate = ISO8601DateFormatter().date(from: now)
        else {
            Issue.record("play printed no window: \(play.json)")
            return
        }
        #expect(abs(untilDate.timeIntervalSince(nowDate) - 3_600) < 5)
        let nothing = try await harness.run(["play", "nothing"], device: "phone")
        #expect(nothing.status == 10 && nothing.json["rights"] == .string("noRights"))
    }
}
