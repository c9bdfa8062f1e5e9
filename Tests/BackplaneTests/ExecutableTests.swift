import Foundation
import BackplaneWire
import Testing
import TestSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Drives the built `backplane` executable the way an operator does.
@Suite(.serialized) struct ExecutableTests {
    static var executable: URL? { BuiltProduct.url(named: "backplane") }

    @Test func serveOnAnEmptyDataDirPrintsFirstRunCredentialsThatWork() async throws {
        let binary = try #require(Self.executable, "build the backplane product first")
        let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("backplane-exe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dataDir) }

        let server = try ChildProcess(binary, ["serve", "--port", "0", "--data-dir", dataDir.path])
        defer { server.terminate() }
        let output = try await server.waitForOutput(containing: "listening on", timeout: .seconds(60))
        #expect(output.contains("FIRST RUN"))
        let token = try #require(Self.value(after: "admin token    :", in: output))
        let port = try #require(FirstRunOutput.port(in: output))

        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/v1/admin/settings")!)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let settings = try JSONDecoder().decode(SettingsResponse.self, from: data)
        #expect(settings.settings == .defaults)

        // SIGTERM shuts down gracefully with exit status 0.
        server.signal(SIGTERM)
        #expect(try await server.waitForExit(timeout: .seconds(30)) == 0)

        // A second start on the same directory is not a first run.
        let again = try ChildProcess(binary, ["serve", "--port", "0", "--data-dir", dataDir.path])
        defer { again.terminate() }
        let secondOutput = try await again.waitForOutput(containing: "listening on", timeout: .seconds(60))
        #expect(!secondOutput.contains("FIRST RUN"))
    }

    @Test func appAndTokenCommandsCreateWorkingCredentials() async throws {
        let binary = try #require(Self.executable, "build the backplane product first")
        let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("backplane-exe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dataDir) }

        let created = try await ChildProcess.run(binary, ["app", "create", "--name", "Acme Video", "--data-dir", dataDir.path])
        #expect(created.status == 0)
        let appId = try #require(Self.value(after: "application id :", in: created.output))
        #expect(Self.value(after: "app key secret :", in: created.output)?.count ?? 0 >= 40)

        let listed = try await ChildProcess.run(binary, ["app", "list", "--data-dir", dataDir.path])
        #expect(listed.output.contains("\(appId)\tAcme Video"))

        let token = try await ChildProcess.run(binary, ["token", "create", "--app", appId, "--scope", "reporting", "--data-dir", dataDir.path])
        #expect(token.status == 0)
        #expect(token.output.hasPrefix("bpt_"))

        let unknownApp = try await ChildProcess.run(binary, ["token", "create", "--app", "app_missing", "--scope", "admin", "--data-dir", dataDir.path])
        #expect(unknownApp.status != 0)
        #expect(unknownApp.output.contains("No application"))

        let badScope = try await ChildProcess.run(binary, ["token", "create", "--app", appId, "--scope", "root", "--data-dir", dataDir.path])
        #expect(badScope.status != 0)

        let migrated = try await ChildProcess.run(binary, ["migrate", "--data-dir", dataDir.path])
        #expect(migrated.status == 0)
    }

    static func value(after label: String, in output: String) -> String? {
        FirstRunOutput.value(after: label, in: output)
    }
}

