import ArgumentParser
import ClientSDK
import Foundation

// Playback rights of downloaded assets, judged locally on the SDK's trusted clock.

struct Rights: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print whether a downloaded asset may be played now, and why not (local, no network).")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The asset id.") var assetId: String

    func run() async throws {
        let engine = BackplaneEngine(configuration: try connection.configuration())
        do {
            Output.print(RightsOutput(assetId: assetId, try await engine.rights.rights(for: assetId), time: try await engine.rights.trustedTime()))
        } catch let error as BackplaneClientError {
            Output.fail(error)
        }
    }
}

struct Play: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record that playback of an asset starts (its expiry after play starts at the first) and print its rights; exits 10 when it may not be played.")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The asset id.") var assetId: String
    @Option(help: "Also record that playback stopped after this many seconds.") var watched: Double?

    func run() async throws {
        let engine = BackplaneEngine(configuration: try connection.configuration())
        do {
            let rights = try await engine.rights.recordPlayStart(assetId: assetId)
            if rights.isPlayable, let watched { try await engine.rights.recordPlayStop(assetId: assetId, watchedSeconds: watched) }
            Output.print(RightsOutput(assetId: assetId, rights, time: try await engine.rights.trustedTime()))
            if !rights.isPlayable { throw ExitCode(10) }
        } catch let error as BackplaneClientError {
            Output.fail(error)
        }
    }
}

struct RightsOutput: Encodable {
    var assetId: String
    var rights: String
    var playable: Bool
    /// valid: when the window ends (absent: never).
    var until: Date?
    /// notYetAvailable: the publish date.
    var from: Date?
    /// expired: which end passed; untrustedTime: why there is no trusted time.
    var reason: String?
    /// offlinePeriodExceeded: the last sync.
    var lastSync: Date?
    var trustedTime: Date?

    init(assetId: String, _ rights: AssetRights, time: TrustedTime) {
        self.assetId = assetId
        self.rights = rights.name
        playable = rights.isPlayable
        trustedTime = time.date
        switch rights {
        case .valid(let until): self.until = until
        case .notYetAvailable(let from): self.from = from
        case .expired(let reason): self.reason = reason.rawValue
        case .offlinePeriodExceeded(let lastSync): self.lastSync = lastSync
        case .untrustedTime(let reason): self.reason = reason.rawValue
        case .noRights: break
        }
    }
}
