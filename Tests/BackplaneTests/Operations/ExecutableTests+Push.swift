import Crypto
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// `backplane app push`: the admin API's push routes, on the host, against the store.
extension ExecutableTests {
    @Test func appPushCommandsSetShowAndClearCredentialsWithoutShowingAKey() async throws {
        let binary = try #require(Self.executable, "build the backplane product first")
        let dataDir = temporaryDirectory("backplane-exe-push")
        try FileManager.default.createDirectory(at: dataDir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dataDir) }
        let created = try await ChildProcess.run(binary, ["app", "create", "--name", "Pushy", "--data-dir", dataDir.path])
        let appId = try #require(Self.value(after: "application id :", in: created.output))
        let keyFile = dataDir.appendingPathComponent("AuthKey.p8")
        try P256.Signing.PrivateKey().pemRepresentation.write(to: keyFile, atomically: true, encoding: .utf8)
        let badFile = dataDir.appendingPathComponent("bad.p8")
        try "not a key".write(to: badFile, atomically: true, encoding: .utf8)
        let common = ["--app", appId, "--team-id", "TEAM123456", "--key-id", "KEY1234567", "--topic", "com.example.video", "--data-dir", dataDir.path]

        let refused = try await ChildProcess.run(binary, ["app", "push", "set-apns", "--key-file", badFile.path] + common)
        #expect(refused.status != 0 && refused.output.contains("privateKey"), "\(refused.output)")
        let set = try await ChildProcess.run(binary, ["app", "push", "set-apns", "--key-file", keyFile.path, "--environment", "sandbox"] + common)
        #expect(set.status == 0, "\(set.output)")
        let shown = try await ChildProcess.run(binary, ["app", "push", "show", "--app", appId, "--data-dir", dataDir.path])
        let configuration = try WireJSON.decoder().decode(PushConfigurationResponse.self, from: Data(shown.output.utf8))
        #expect(configuration.apns?.teamId == "TEAM123456" && configuration.apns?.environment == .sandbox && configuration.fcm == nil)
        #expect(!shown.output.contains("PRIVATE KEY") && !set.output.contains("PRIVATE KEY"))

        let cleared = try await ChildProcess.run(binary, ["app", "push", "clear", "--app", appId, "--provider", "apns", "--data-dir", dataDir.path])
        #expect(cleared.status == 0)
        let again = try await ChildProcess.run(binary, ["app", "push", "clear", "--app", appId, "--provider", "apns", "--data-dir", dataDir.path])
        #expect(again.status != 0, "nothing left to clear")
        let unknown = try await ChildProcess.run(binary, ["app", "push", "show", "--app", "app_missing", "--data-dir", dataDir.path])
        #expect(unknown.status != 0 && unknown.output.contains("No application"))
    }
}
