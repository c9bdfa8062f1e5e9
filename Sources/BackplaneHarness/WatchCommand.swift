import ArgumentParser
import ClientSDK
import Foundation

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print SDK events as JSON lines until interrupted (SIGINT/SIGTERM).")
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "Sync interval in seconds.") var interval = 30
    @Flag(help: "Do not open the wake-up channel; rely on interval syncs.") var noChannel = false

    func run() async throws {
        var configuration = try connection.configuration()
        configuration.sync.interval = .seconds(interval)
        configuration.sync.useWakeUpChannel = !noChannel
        let engine = BackplaneEngine(configuration: configuration)
        let events = engine.events()
        let stop = SignalWatcher(signals: [SIGINT, SIGTERM]) {
            Task { await engine.shutdown() }
        }
        defer { stop.cancel() }
        let printer = Task {
            for await event in events {
                Output.line(EventOutput(event))
            }
        }
        do {
            try await engine.start()
        } catch let error as BackplaneClientError {
            await engine.shutdown()
            await printer.value
            Output.fail(error)
        }
        await printer.value
    }
}
