import ArgumentParser
import ClientSDK
import Foundation

// Only the values this build knows (a vocabulary's own `init(rawValue:)` takes any text).
extension EventType: ExpressibleByArgument {
    public init?(argument: String) { guard let known = Self.known(argument) else { return nil }; self = known }
}

extension AssetDeletionReason: ExpressibleByArgument {
    public init?(argument: String) { guard let known = Self.known(argument) else { return nil }; self = known }
}

extension ResetType: ExpressibleByArgument {
    public init?(argument: String) { guard let known = Self.known(argument) else { return nil }; self = known }
}

extension DownloadLimitType: ExpressibleByArgument {
    public init?(argument: String) { guard let known = Self.known(argument) else { return nil }; self = known }
}

struct Log: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Log events through the SDK's event logger, then upload the queue (unless --queue-only).",
        discussion: "Example: log --type downloadStart --asset ep-1; log --type custom --name rating --number 4 --count 100")
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The event type (\(EventType.allCases.map(\.rawValue).joined(separator: ", "))).") var type: EventType
    @Option(help: "Asset id.") var asset: String?
    @Option(help: "assetDeleted: internal, remote, user, userChange, failedDownload or deleteAll.") var reason: AssetDeletionReason?
    @Option(help: "reset: install or remoteWipe.") var reset: ResetType?
    @Option(help: "downloadLimitReached: account, asset, copies, device or external.") var limit: DownloadLimitType?
    @Option(help: "Bits per second.") var bitrate: Int64?
    @Option(help: "Seconds.") var duration: Double?
    @Option(help: "Error code.") var errorCode: String?
    @Option(help: "Error message.") var errorMessage: String?
    @Option(help: "custom: the event's name.") var name: String?
    @Option(help: "custom: a string value.") var string: String?
    @Option(help: "custom: a numeric value.") var number: Double?
    @Option(help: "How many copies to log.") var count = 1
    @Flag(help: "Only queue the events (no network); they go up with a later command.") var queueOnly = false

    func run() async throws {
        let content = EventContent(
            type: type, assetId: asset, deletionReason: reason, resetType: reset, limitType: limit, bitrate: bitrate,
            durationSeconds: duration, errorCode: errorCode, errorMessage: errorMessage, customName: name, customString: string,
            customNumber: number)
        let configuration = try connection.configuration()
        let engine = BackplaneEngine(configuration: configuration)
        var logged = 0
        do {
            for _ in 0..<max(count, 0) where try engine.eventLogger.log(content) != nil { logged += 1 }
        } catch let error as BackplaneClientError {
            Output.fail(error)
        }
        if queueOnly {
            Output.print(JSONValue.object([
                "logged": .int(Int64(logged)), "queued": .int(Int64((try? engine.eventLogger.queuedCount()) ?? 0)),
            ]))
            return
        }
        // Start uploads what is queued after its sync; uploadEvents waits for that to finish.
        try await Session.run(configuration) { engine in
            try await engine.uploadEvents()
            return .object(["logged": .int(Int64(logged)), "queued": .int(Int64(try engine.eventLogger.queuedCount()))])
        }
    }
}
