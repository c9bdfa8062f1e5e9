import Foundation
import BackplaneWire

// How an asset's download ends: completed (its record moves from the queue to the assets, with
// its grant and any warning), or failed (the rule of threes counts it, or a fatal failure ends it).
extension DownloadRunner {
    func completed(_ asset: LocalAsset, after elapsed: Duration) {
        // Done with this pass's errors and URL refreshes, whether or not it is still wanted:
        // queued again later, it starts afresh.
        state.completed(asset.assetId)
        do {
            guard try database.completeDownload(asset, downloadedAt: clock.now().date ?? clock.latestTrusted ?? Date()) else {
                // Removed while it finished: whoever removed it has said so; the files go too.
                try? content.removeFiles(of: asset.assetId)
                return
            }
        } catch {
            failed(asset.assetId, DownloadFailure(.storage, "Could not record the completed download: \(error)."))
            return
        }
        let seconds = elapsed.seconds
        events.log(.downloadComplete(
            assetId: asset.assetId, bitrate: seconds > 0 ? Int64(nonNegative: Double(asset.size) * 8 / seconds) : nil, durationSeconds: seconds))
        if let mismatch = asset.request?.sizeMismatch(completedSize: asset.size) {
            events.record(
                .downloadWarning(assetId: asset.assetId, code: "sizeMismatch", message: mismatch),
                tellingApp: .downloadWarning(assetId: asset.assetId, message: mismatch))
        }
        // As recorded, with the grant it came with.
        let recorded = (try? database.asset(assetId: asset.assetId)) ?? asset
        events.tellApp(.downloadCompleted(DownloadAsset(completed: recorded, root: content.root)))
    }

    func failed(_ assetId: String, _ failure: DownloadFailure, forGood: Bool = false) {
        let updated = try? database.recordFailure(assetId: assetId) { download in
            download.errorCount = download.errorCount.addingClamped(1)
            download.lastFailure = failure
            download.failed = forGood || failure.isFatal || download.errorCount >= Self.maxErrorPasses
        }
        state.tryFailed(assetId)
        let willRetry = updated.map { !$0.failed } ?? false
        events.record(
            .downloadError(
                assetId: assetId, code: failure.kind.rawValue, message: String(failure.message.prefix(utf8Bytes: WireLimits.maxEventMessageBytes))),
            tellingApp: .downloadError(assetId: assetId, failure: failure, willRetry: willRetry))
    }
}
