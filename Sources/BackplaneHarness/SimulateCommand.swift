import ArgumentParser
import ClientSDK
import Foundation

struct Simulate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start N devices of one user, each with its own data directory, and summarise.")
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "How many devices (all of the --user).") var devices = 10
    @Option(help: "How many devices start at the same time.") var concurrency = 16

    func validate() throws {
        guard (1...10_000).contains(devices) else { throw ValidationError("--devices must be 1 to 10000.") }
        guard (1...256).contains(concurrency) else { throw ValidationError("--concurrency must be 1 to 256.") }
    }

    func run() async throws {
        let base = URL(fileURLWithPath: connection.dataDir)
        let configurations = try (0..<devices).map { index in
            try connection.configuration(dataDirectory: base.appendingPathComponent("sim-\(index)"))
        }
        let started = Date()
        var summary = SimulationSummary(devices: devices)
        try await withThrowingTaskGroup(of: SimulationSummary.Result.self) { group in
            var next = 0
            func launch() {
                let configuration = configurations[next]
                next += 1
                group.addTask { await SimulationSummary.Result.of(configuration) }
            }
            while next < min(concurrency, configurations.count) { launch() }
            while let result = try await group.next() {
                summary.add(result)
                let done = summary.registered + summary.failed
                if done % max(1, devices / 10) == 0 || done == devices {
                    FileHandle.standardError.write(Data("simulate: \(done)/\(devices) done, \(summary.downloadEnabled) enabled, \(summary.failed) failed\n".utf8))
                }
                if next < configurations.count { launch() }
            }
        }
        summary.seconds = Date().timeIntervalSince(started)
        Output.print(summary)
        if summary.failed > 0 { throw ExitCode(1) }
    }
}

struct SimulationSummary: Encodable {
    var devices: Int
    var registered = 0
    var downloadEnabled = 0
    var deviceLimitReached = 0
    var failed = 0
    var failures: [String: Int] = [:]
    var seconds: Double = 0

    enum Result: Sendable {
        case registered(downloadEnabled: Bool, limitReached: Bool)
        case failed(String)

        static func of(_ configuration: BackplaneClientConfiguration) async -> Result {
            let engine = BackplaneEngine(configuration: configuration)
            let events = engine.events()
            do {
                try await engine.start()
                let status = await engine.status
                await engine.shutdown()
                var limitReached = false
                for await event in events {
                    if case .deviceLimitReached = event { limitReached = true }
                }
                if let error = status.lastError { return .failed(error.code?.rawValue ?? error.kind.rawValue) }
                return .registered(downloadEnabled: status.device?.downloadEnabled ?? false, limitReached: limitReached)
            } catch let error as BackplaneClientError {
                await engine.shutdown()
                return .failed(error.code?.rawValue ?? error.kind.rawValue)
            } catch {
                await engine.shutdown()
                return .failed("\(error)")
            }
        }
    }

    mutating func add(_ result: Result) {
        switch result {
        case .registered(let enabled, let limitReached):
            registered += 1
            if enabled { downloadEnabled += 1 }
            if limitReached { deviceLimitReached += 1 }
        case .failed(let reason):
            failed += 1
            failures[reason, default: 0] += 1
        }
    }
}
