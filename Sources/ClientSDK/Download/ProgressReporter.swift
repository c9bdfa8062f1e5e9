import Foundation
import Synchronization

/// Hands an asset's progress on at most once per percent or per second, and stores it at most
/// every `storeInterval`, so that the queue shows it after a restart. Storing is a commit, and a
/// commit waits for the disk: once per percent, a fast download's fetches spent much of their
/// time waiting for it. (What is on disk is counted again when the download goes on.)
final class ProgressReporter: Sendable {
    static let storeInterval = Duration.seconds(2)

    let assetId: String
    let database: SDKDatabase
    let events: EngineEvents
    private let state = Mutex(State())

    private struct State {
        var last: AssetProgress?
        var reportedFraction: Double = -1
        var reportedAt = ContinuousClock.now - .seconds(10)
        var storedAt = ContinuousClock.now
    }

    init(assetId: String, database: SDKDatabase, events: EngineEvents) {
        self.assetId = assetId
        self.database = database
        self.events = events
    }

    func report(_ progress: AssetProgress) {
        let fraction = progress.expected.map { $0 > 0 ? min(Double(progress.bytes) / Double($0), 1) : 0 }
        let (due, storing) = state.withLock { state -> (Bool, Bool) in
            state.last = progress
            let now = ContinuousClock.now
            guard (fraction ?? 0) - state.reportedFraction >= 0.01 || now - state.reportedAt >= .seconds(1) else { return (false, false) }
            state.reportedFraction = fraction ?? 0
            state.reportedAt = now
            guard now - state.storedAt >= Self.storeInterval else { return (true, false) }
            state.storedAt = now
            return (true, true)
        }
        guard due else { return }
        if storing { store(progress) }
        events.tellApp(.downloadProgress(assetId: assetId, bytes: progress.bytes, expectedBytes: progress.expected, fraction: fraction))
    }

    /// The last progress heard.
    var last: AssetProgress? { state.withLock { $0.last } }

    /// Stores the last progress heard.
    func flush() {
        if let last = state.withLock({ $0.last }) { store(last) }
    }

    private func store(_ progress: AssetProgress) {
        _ = try? database.updateDownload(assetId: assetId) { download in
            download.bytesDownloaded = progress.bytes
            download.expectedBytes = progress.expected
            download.expectedIsEstimate = progress.isEstimate
        }
    }
}
