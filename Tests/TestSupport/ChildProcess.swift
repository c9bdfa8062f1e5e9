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
        output.split(separator: "\n").first { $0.contains("backplane: listening on") }
            .flatMap { $0.split(separator: ":").last }
            .flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
    }
}

/// A fresh directory for a test's data: in memory (`/dev/shm`) where there is such a file
/// system, else under the system's temporary directory. What the tests need of their files is
/// that they outlive a process (restarts, kill -9), which memory gives; on a disk, the suite's
/// thousands of commits wait on its flushes, and the SDK's synchronous database calls hold the
/// few threads of the concurrency pool meanwhile, so every test stalls behind them.
///
/// They go under one directory per test process, `backplane-tests-<pid>`; the first call removes
/// those of processes that have ended, which would otherwise keep their data in memory until
/// the machine restarts.
public func temporaryDirectory(_ prefix: String) -> URL {
    testRoot.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
}

/// `temporaryDirectory(prefix)`, created (for files a test writes itself: media, certificates).
public func createdTemporaryDirectory(_ prefix: String) throws -> URL {
    let directory = temporaryDirectory(prefix)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return directory
}

/// Where test directories go: `/dev/shm` where it can be written, else the temporary directory.
public let temporaryBaseDirectory: URL = {
    let memory = URL(fileURLWithPath: "/dev/shm")
    return FileManager.default.isWritableFile(atPath: memory.path) ? memory : FileManager.default.temporaryDirectory
}()

private let testRoot: URL = {
    let base = temporaryBaseDirectory
    let prefix = "backplane-tests-"
    for name in (try? FileManager.default.contentsOfDirectory(atPath: base.path)) ?? [] where name.hasPrefix(prefix) {
        guard let pid = pid_t(name.dropFirst(prefix.count)), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH else { continue }
        try? FileManager.default.removeItem(at: base.appendingPathComponent(name))
    }
    let root = base.appendingPathComponent("\(prefix)\(getpid())")
    // Some tests write a file at the path they are given: its parent must be there.
    try? FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    return root
}()

/// A child process whose combined stdout and stderr is collected as it arrives.
///
/// Spawned with `posix_spawn` rather than Foundation's `Process`: on Linux, `Process.run()`
/// scans `/proc/self/fd` with a struct copy that can read past glibc's buffer and crash the
/// whole test process now and then (swift-corelibs-foundation PR #5472, after Swift 6.3.1).
public final class ChildProcess: @unchecked Sendable {
    private let pid: pid_t
    private let lock = NSLock()
    private var collected = Data()
    private var status: Int32?

    /// One spawn at a time: a pipe made for one child must not leak into another.
    private static let spawning = NSLock()

    public init(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil) throws {
        let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer {
            argv.forEach { free($0) }
            envp?.forEach { free($0) }
        }
        let (child, readEnd) = try Self.spawning.withLock { () throws -> (pid_t, Int32) in
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            let (readEnd, writeEnd) = (ends[0], ends[1])
            _ = fcntl(readEnd, F_SETFD, FD_CLOEXEC)
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_adddup2(&actions, writeEnd, 1)
            posix_spawn_file_actions_adddup2(&actions, writeEnd, 2)
            // Nothing else of the test process leaks into the child (sockets, databases, other
            // children's pipes). glibc ignores a close of a descriptor closed meanwhile.
            let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.compactMap { Int32($0) } ?? []
            for descriptor in open where descriptor > 2 { posix_spawn_file_actions_addclose(&actions, descriptor) }
            var attributes = posix_spawnattr_t()
            posix_spawnattr_init(&attributes)
            defer { posix_spawnattr_destroy(&attributes) }
            // Its own process group: a terminal's Ctrl-C reaches the test runner only. And a fresh
            // signal state: the spawning thread (a pool thread) blocks signals, and a blocked mask
            // is inherited, so a child such as nginx would never see the SIGTERM that stops it.
            var noSignals = sigset_t()
            sigemptyset(&noSignals)
            posix_spawnattr_setsigmask(&attributes, &noSignals)
            var allSignals = sigset_t()
            sigfillset(&allSignals)
            posix_spawnattr_setsigdefault(&attributes, &allSignals)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
            var child = pid_t()
            let spawned = envp.map { posix_spawn(&child, executable.path, &actions, &attributes, argv, $0) }
                ?? posix_spawn(&child, executable.path, &actions, &attributes, argv, environ)
            close(writeEnd)
            guard spawned == 0 else {
                close(readEnd)
                throw POSIXError(.init(rawValue: spawned) ?? .EIO)
            }
            return (child, readEnd)
        }
        pid = child
        // A thread of its own reads until the child (and whatever inherited its output) ends.
        let reader = Thread { [weak self] in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                guard let self else { break }
                self.lock.withLock { self.collected.append(contentsOf: buffer[0..<count]) }
            }
            close(readEnd)
        }
        reader.start()
    }

    public var output: String { lock.withLock { String(decoding: collected, as: UTF8.self) } }

    /// Reaps the child once it ended: its exit code, or the signal that ended it.
    private var exitStatus: Int32? {
        lock.withLock {
            if let status { return status }
            var raw: Int32 = 0
            guard waitpid(pid, &raw, WNOHANG) == pid else { return nil }
            // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import as functions.
            let signal = raw & 0x7f
            status = signal == 0 ? (raw >> 8) & 0xff : signal
            return status
        }
    }

    public var isRunning: Bool { exitStatus == nil }

    public func waitForOutput(containing text: String, timeout: Duration) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let current = output
            if current.contains(text) { return current }
            if !isRunning { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw ChildProcessError.timedOut(waitingFor: text, output: output)
    }

    public func waitForExit(timeout: Duration) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let status = exitStatus {
                // Let the last output arrive.
                try await Task.sleep(for: .milliseconds(50))
                return status
            }
            guard ContinuousClock.now < deadline else { throw ChildProcessError.timedOut(waitingFor: "exit", output: output) }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    public func signal(_ signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    /// Ends the child (SIGTERM) and waits for it.
    public func terminate() {
        guard isRunning else { return }
        kill(pid, SIGTERM)
        while isRunning { usleep(10_000) }
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
