import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Where `swift build` / `swift test` put the package's executables.
public enum BuiltProduct {
    public static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `swift test` builds every product; the binaries sit next to the test bundle.
    public static func url(named name: String) -> URL? {
        let candidates = [
            Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent(name),
            Bundle.main.bundleURL.appendingPathComponent(name),
            packageRoot.appendingPathComponent(".build/debug/\(name)"),
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }
}

/// Reads the labelled lines the `backplane` executable prints (first-run banner, `app create`).
public enum FirstRunOutput {
    public static func value(after label: String, in output: String) -> String? {
        output.split(separator: "\n").first { $0.contains(label) }
            .map { $0.components(separatedBy: label)[1].trimmingCharacters(in: .whitespaces) }
    }

    /// The port from the server's "listening on 127.0.0.1:PORT" log line.
    public static func port(in output: String) -> Int? {
        output.split(separator: "\n").first { $0.contains("listening on") }
            .flatMap { $0.split(separator: ":").last }
            .flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
    }
}

/// A fresh directory for a test's data: in memory (`/dev/shm`) where there is such a file
/// system, else under the system's temporary directory. What the tests need of their files is
/// that they outlive a process (restarts, kill -9), which memory gives; on a disk, the suite's
/// thousands of commits wait on its flushes, and the SDK's synchronous database calls hold the
/// few threads of the concurrency pool meanwhile, so every test stalls behind them.
public func temporaryDirectory(_ prefix: String) -> URL {
    let memory = URL(fileURLWithPath: "/dev/shm")
    let root = FileManager.default.isWritableFile(atPath: memory.path) ? memory : FileManager.default.temporaryDirectory
    return root.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
}

/// A child process whose combined stdout and stderr is collected as it arrives.
public final class ChildProcess: @unchecked Sendable {
    private let process = Process()
    private let pipe = Pipe()
    private let lock = NSLock()
    private var collected = Data()

    public init(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil) throws {
        process.executableURL = executable
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.standardOutput = pipe
        process.standardError = pipe
        pipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lock.withLock { self.collected.append(data) }
        }
        try process.run()
    }

    public var output: String { lock.withLock { String(decoding: collected, as: UTF8.self) } }

    public func waitForOutput(containing text: String, timeout: Duration) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let current = output
            if current.contains(text) { return current }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw ChildProcessError.timedOut(waitingFor: text, output: output)
    }

    public func waitForExit(timeout: Duration) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            guard ContinuousClock.now < deadline else { throw ChildProcessError.timedOut(waitingFor: "exit", output: output) }
            try await Task.sleep(for: .milliseconds(50))
        }
        // Let the last output arrive.
        try await Task.sleep(for: .milliseconds(50))
        return process.terminationStatus
    }

    public func signal(_ signal: Int32) {
        if process.isRunning { kill(process.processIdentifier, signal) }
    }

    public func terminate() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        pipe.fileHandleForReading.readabilityHandler = nil
    }

    /// Runs to completion and returns the exit status and output.
    public static func run(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil, timeout: Duration = .seconds(60)) async throws -> (status: Int32, output: String) {
        let child = try ChildProcess(executable, arguments, environment: environment)
        let status = try await child.waitForExit(timeout: timeout)
        return (status, child.output.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}

public enum ChildProcessError: Error, CustomStringConvertible {
    case timedOut(waitingFor: String, output: String)

    public var description: String {
        switch self {
        case .timedOut(let text, let output): "Timed out waiting for '\(text)'. Output so far:\n\(output)"
        }
    }
}
