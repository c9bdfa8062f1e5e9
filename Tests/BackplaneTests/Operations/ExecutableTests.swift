import Foundation
import Backplane
import BackplaneWire
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif
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
        let output = try await server.waitForOutput(containing: "backplane: listening on", timeout: .seconds(60))
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
        let secondOutput = try await again.waitForOutput(containing: "backplane: listening on", timeout: .seconds(60))
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
        #expect(Self.value(after: "token id:", in: token.output)?.hasPrefix("tok_") == true)

        let expiring = try await ChildProcess.run(
            binary, ["token", "create", "--app", appId, "--scope", "cms", "--name", "importer", "--expires-in-days", "30", "--data-dir", dataDir.path])
        #expect(expiring.status == 0)
        let expiringId = try #require(Self.value(after: "token id:", in: expiring.output))
        let revoked = try await ChildProcess.run(binary, ["token", "revoke", expiringId, "--app", appId, "--data-dir", dataDir.path])
        #expect(revoked.status == 0)
        #expect(revoked.output.contains("\(expiringId) revoked at"))
        let tokens = try await ChildProcess.run(binary, ["token", "list", "--app", appId, "--data-dir", dataDir.path])
        let rows = tokens.output.split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
        #expect(rows.count == 2)
        let importer = try #require(rows.first { $0.first == expiringId })
        #expect(importer[1] == "cms" && importer[2] == "importer" && importer[4] != "-" && importer[5] == "revoked")
        #expect(rows.contains { $0[1] == "reporting" && $0[4] == "-" && $0[5] == "active" })
        #expect(!tokens.output.contains("bpt_"), "a listing showed a token")
        let badExpiry = try await ChildProcess.run(
            binary, ["token", "create", "--app", appId, "--scope", "cms", "--expires-in-days", "0", "--data-dir", dataDir.path])
        #expect(badExpiry.status != 0)

        let keys = try await ChildProcess.run(binary, ["app", "keys", "--app", appId, "--data-dir", dataDir.path])
        #expect(keys.output.hasPrefix("ak_"))
        #expect(!keys.output.contains("aks_"), "a listing showed a key secret")

        let unknownApp = try await ChildProcess.run(binary, ["token", "create", "--app", "app_missing", "--scope", "admin", "--data-dir", dataDir.path])
        #expect(unknownApp.status != 0)
        #expect(unknownApp.output.contains("No application"))

        let badScope = try await ChildProcess.run(binary, ["token", "create", "--app", appId, "--scope", "root", "--data-dir", dataDir.path])
        #expect(badScope.status != 0)

        let migrated = try await ChildProcess.run(binary, ["migrate", "--data-dir", dataDir.path])
        #expect(migrated.status == 0)
    }

    @Test func aTakenPortFailsWithOneClearLineAndKeepsTheFirstRunCredentialsForTheNextStart() async throws {
        let binary = try #require(Self.executable, "build the backplane product first")
        let dataDir = temporaryDirectory("backplane-exe")
        defer { try? FileManager.default.removeItem(at: dataDir) }
        let holder = try HeldPort()
        defer { holder.close() }

        let refused = try await ChildProcess.run(binary, ["serve", "--port", "\(holder.port)", "--data-dir", dataDir.path])
        #expect(refused.status != 0)
        #expect(refused.output.contains("cannot listen on 127.0.0.1:\(holder.port): the port is in use"))
        #expect(refused.output.contains("--port"))
        #expect(!refused.output.contains("FIRST RUN"), "credentials printed before the port was ours")

        // The environment supplies what no flag gives; the next start is the first run.
        let server = try ChildProcess(binary, ["serve"], environment: ["BACKPLANE_PORT": "0", "BACKPLANE_DATA_DIR": dataDir.path])
        defer { server.terminate() }
        let output = try await server.waitForOutput(containing: "backplane: listening on", timeout: .seconds(60))
        #expect(output.contains("FIRST RUN"))
        #expect(FirstRunOutput.port(in: output) != holder.port)
        #expect(FileManager.default.fileExists(atPath: dataDir.appendingPathComponent("backplane.sqlite").path))
    }

    @Test func aFlagWinsOverTheEnvironmentAndABadVariableIsNamed() async throws {
        let binary = try #require(Self.executable, "build the backplane product first")
        let dataDir = temporaryDirectory("backplane-exe")
        defer { try? FileManager.default.removeItem(at: dataDir) }

        let bad = try await ChildProcess.run(binary, ["serve", "--data-dir", dataDir.path], environment: ["BACKPLANE_MAX_CONNECTIONS": "many"])
        #expect(bad.status != 0)
        #expect(bad.output.contains("BACKPLANE_MAX_CONNECTIONS is not a valid value for --max-connections"))
        #expect(!FileManager.default.fileExists(atPath: dataDir.path), "a bad option created the data directory")

        let outOfRange = try await ChildProcess.run(binary, ["serve", "--data-dir", dataDir.path], environment: ["BACKPLANE_PORT": "70000"])
        #expect(outOfRange.output.contains("--port must be 0 to 65535"))

        let server = try ChildProcess(binary, ["serve", "--port", "0", "--data-dir", dataDir.path], environment: ["BACKPLANE_PORT": "1"])
        defer { server.terminate() }
        let output = try await server.waitForOutput(containing: "backplane: listening on", timeout: .seconds(60))
        #expect(FirstRunOutput.port(in: output) != 1)

        let version = try await ChildProcess.run(binary, ["--version"])
        #expect(version.status == 0)
        #expect(version.output.trimmingCharacters(in: .whitespacesAndNewlines) == BackplaneBuild.version)
    }

    static func value(after label: String, in output: String) -> String? {
        FirstRunOutput.value(after: label, in: output)
    }
}
