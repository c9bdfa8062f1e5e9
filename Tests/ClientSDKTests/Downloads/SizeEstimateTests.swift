import ClientSDK
import Foundation
import Testing
import TestSupport

/// The size of an asset before its download: estimated when it is queued (and on request,
/// without queueing), shown on the asset, and checked against the storage rules so that an
/// asset that cannot fit is never started.
@Suite(.serialized) struct SizeEstimateTests {
    /// Within 10 % of the size each asset completes at: ffmpeg's DASH (whose `bandwidth` says
    /// 300 kbit/s of a stream that is 240), ffmpeg's HLS (`BANDWIDTH` far above the media) and a
    /// flat file (exact, from `HEAD`).
    @Test func estimatesAreWithinTenPerCentOfTheSizeDownloaded() async throws {
        guard PlaybackPlayersTests.playersAreInstalled() else { return }
        let root = try createdTemporaryDirectory("backplane-estimates")
        defer { try? FileManager.default.removeItem(at: root) }
        let bench = try await DownloadBench.start()
        try await DASHDownloadTests.makeAsset(.template, in: root, origin: bench.origin)
        try await PlaybackPlayersTests.makeAsset(.fmp4Clear, in: root, origin: bench.origin)
        bench.origin.serve("/film.mp4", TestOrigin.content(1_234_567))
        let requests = [
            DownloadRequest(assetId: "dash", url: bench.origin.url("/template/manifest.mpd"), kind: .dash, maxVideoBitrate: 500_000, audioLanguages: ["fr"]),
            DownloadRequest(assetId: "hls", url: bench.origin.url("/fmp4Clear/master.m3u8"), kind: .hls),
            DownloadRequest(assetId: "film", url: bench.origin.url("/film.mp4")),
        ]
        for request in requests {
            // Asked first, without queueing: the origin's media is not fetched.
            let before = bench.origin.bytesServed(under: "/")
            let asked = try await bench.engine.downloads.estimate(request)
            #expect(bench.origin.bytesServed(under: "/") - before < 20_000, "\(request.assetId): the estimate fetched media")
            #expect(asked.shortfall == nil && asked.room > asked.bytes)
            let queued = try await bench.engine.downloads.enqueue(request)
            let estimate = try #require(queued.estimatedBytes, "\(request.assetId) has no estimate")
            let asset = try await bench.waitForOutcome(request.assetId, timeout: .seconds(60))
            try #require(asset.state == .completed, "\(request.assetId): \(String(describing: asset.lastFailure))")
            let size = asset.bytesDownloaded
            let error = abs(Double(estimate - size)) / Double(size)
            #expect(error <= 0.10, "\(request.assetId): estimated \(estimate) bytes, completed at \(size) (\(Int(error * 100)) %)")
            print("size estimate: \(request.assetId) estimated \(estimate) bytes, completed at \(size) (\(String(format: "%+.1f", Double(estimate - size) / Double(size) * 100)) %)")
            #expect(abs(Double(asked.bytes - estimate)) / Double(size) <= 0.01, "\(request.assetId): \(asked.bytes) asked, \(estimate) queued")
            if request.kind == .file { #expect(asked.isExact && estimate == size) }
        }
        await bench.stop()
    }

    /// An asset whose estimate does not fit under `maxStorage` is `blocked(.storage)` with the
    /// bytes it lacks and is never started; the one behind it lacks its own bytes and the ones
    /// ahead; deleting a completed asset makes room, and both download.
    @Test func anAssetThatCannotFitIsBlockedWithItsShortfallAndNeverStarted() async throws {
        let bench = try await DownloadBench.start(options: { $0.maxStorage = 250_000 })
        bench.origin.serve("/first.mp4", TestOrigin.content(100_000))
        bench.origin.serve("/big.mp4", TestOrigin.content(200_000))
        bench.origin.serve("/small.mp4", TestOrigin.content(30_000))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "first", url: bench.origin.url("/first.mp4")))
        #expect(try await bench.waitForOutcome("first").state == .completed)

        // 200,000 bytes where 150,000 are left.
        let big = DownloadRequest(assetId: "big", url: bench.origin.url("/big.mp4"))
        let asked = try await bench.engine.downloads.estimate(big)
        #expect(asked.bytes == 200_000 && asked.isExact && asked.room == 150_000 && asked.shortfall == 50_000)
        let queued = try await bench.engine.downloads.enqueue(big)
        #expect(queued.estimatedBytes == 200_000)
        #expect(queued.state == .blocked(.storage) && queued.storageShortfall == 50_000, "\(queued.state)")
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "small", url: bench.origin.url("/small.mp4")))
        let queue = try await bench.engine.downloads.queue()
        #expect(queue.map(\.storageShortfall) == [50_000, 80_000], "\(queue.map(\.storageShortfall))")
        try await bench.wait("the queue to block on storage") { try await bench.engine.downloads.status() == .blocked(.storage) }
        // Given time, it still never starts: no byte of it is asked for.
        try await Task.sleep(for: .milliseconds(500))
        #expect(bench.origin.requests("/big.mp4") == 0 && bench.origin.requests("/small.mp4") == 0)
        #expect(try await bench.engine.downloads.asset("big")?.state == .blocked(.storage))
        // A request that would fit at the end of the queue still lacks what the queue takes.
        let after = try await bench.engine.downloads.estimate(DownloadRequest(assetId: "other", url: bench.origin.url("/small.mp4")))
        #expect(after.room == 0 && after.shortfall == 30_000, "\(after)")

        try await bench.engine.downloads.remove(assetId: "first")
        #expect(try await bench.waitForOutcome("big").state == .completed)
        #expect(try await bench.waitForOutcome("small").state == .completed)
        #expect(bench.origin.bytesServed("/big.mp4") == 200_000)
        await bench.stop()
    }
}
