import Foundation
import Shared
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Drives the built `backplane` executable the way an operator does.
@Suite(.serialized) struct ExecutableTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `swift test` builds every product; the binary sits next to the test bundle.
    static var executable: URL? {
        let candidates = [
            Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("backplane"),
            Bundle.main.bundleURL.appendingPathComponent("backplane"),
            root.appendingPathComponent(".build/debug/backplane"),
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    @Test func serveOnAnEmptyDataDirPrintsFirstRunCredentialsThatWork() async throws {
        let binary = try #require(Self.executable, "build the backplane product first")
        let dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("backplane-exe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dataDir) }

        let server = try ChildProcess(binary, ["serve", "--port", "0", "--data-dir", dataDir.path])
        defer { server.terminate() }
        let output = try await server.waitForOutput(containing: "listening on", timeout: .seconds(60))
        #expect(output.contains("FIRST RUN"))
        let token = try #require(Self.value(after: "admin token    :", in: output))
        let port = try #require(output.split(separator: "\n").first { $0.contains("listening on") }
            .flatMap { $0.split(separator: ":").last }.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) })

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
        output.split(separator: "\n").first { $0.contains(label) }
            .map { $0.components(separatedBy: label)[1].trimmingCharacters(in: .whitespaces) }
    }
}

/// A child process whose combined stdout and stderr is collected as it arrives.
final class ChildProcess: @unchecked Sendable {
    private let process = Process()
    private let pipe = Pipe()
    private let lock = NSLock()
    private var collected = Data()

    init(_ executable: URL, _ arguments: [String]) throws {
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = pipe
        process.standardError = pipe
        pipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lock.withLock { self.collected.append(data) }
        }
        try process.run()
    }

    var output: String { lock.withLock { String(decoding: collected, as: UTF8.self) } }

    func waitForOutput(containing text: String, timeout: Duration) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let current = output
            if current.contains(text) { return current }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw ChildProcessError.timedOut(waitingFor: text, output: output)
    }

    func waitForExit(timeout: Duration) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            guard ContinuousClock.now < deadline else { throw ChildProcessError.timedOut(waitingFor: "exit", output: output) }
            try await Task.sleep(for: .milliseconds(50))
        }
        // Let the last output arrive.
        try await Task.sleep(for: .milliseconds(50))
        return process.terminationStatus
    }

    func signal(_ signal: Int32) {
        if process.isRunning { kill(process.processIdentifier, signal) }
    }

    func terminate() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        pipe.fileHandleForReading.readabilityHandler = nil
    }

    /// Runs to completion and returns the exit status and output.
    static func run(_ executable: URL, _ arguments: [String], timeout: Duration = .seconds(60)) async throws -> (status: Int32, output: String) {
        let child = try ChildProcess(executable, arguments)
        let status = try await child.waitForExit(timeout: timeout)
        return (status, child.output.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}

enum ChildProcessError: Error, CustomStringConvertible {
    case timedOut(waitingFor: String, output: String)

    var description: String {
        switch self {
        case .timedOut(let text, let output): "Timed out waiting for '\(text)'. Output so far:\n\(output)"
        }
    }
}
