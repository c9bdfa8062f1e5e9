import Backplane
import BackplaneWire
import ClientSDK
import Foundation
import Testing
import TestSupport

/// Downloading through the engine from a real HTTP origin: what ends up on disk, the HLS
/// choices, the rule of threes, resuming, and the requests refused before anything is queued.
@Suite struct DownloadEngineTests {
    @Test func aFlatFileDownloadsWholeAndEqualsTheOriginsBytes() async throws {
        let bench = try await DownloadBench.start()
        let movie = TestOrigin.content(1_500_000, seed: 3)
        bench.origin.serve("/movies/feature.mp4", movie)
        let queued = try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "feature", url: bench.origin.url("/movies/feature.mp4"), allowedMIMETypes: ["video/mp4"], metadata: ["title": "Feature"]))
        #expect(queued.position == 0)
        let asset = try await bench.waitForOutcome("feature")
        #expect(asset.state == .completed)
        #expect(asset.bytesDownloaded == Int64(movie.count))
        #expect(asset.request.metadata == ["title": "Feature"])
        let file = try #require(asset.localURL)
        #expect(file.lastPathComponent == "feature.mp4")
        #expect(try Data(contentsOf: file) == movie)
        #expect(try await bench.engine.downloads.queue().isEmpty)
        #expect(bench.origin.requests("/movies/feature.mp4") == 1)
        try await bench.events.wait(for: "downloadCompleted")
        for name in ["downloadQueued", "downloadStarted", "downloadProgress", "downloadCompleted"] {
            #expect(bench.events.count(name) >= 1, "\(name)")
        }
        // Progress is throttled: never more than one event per percent (plus the first).
        #expect(bench.events.count("downloadProgress") <= 102)
        await bench.stop()
    }

    @Test func aFileBrokenOffMidwayResumesInTheSamePassWithoutStartingOver() async throws {
        let bench = try await DownloadBench.start()
        let movie = TestOrigin.content(1_000_000, seed: 9)
        bench.origin.serve("/movies/broken.mp4", movie)
        bench.origin.inject(.dropAfter(bytes: 600_000, times: 1), at: "/movies/broken.mp4")
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "broken", url: bench.origin.url("/movies/broken.mp4")))
        let asset = try await bench.waitForOutcome("broken")
        #expect(asset.state == .completed)
        #expect(try Data(contentsOf: try #require(asset.localURL)) == movie)
        // The second try asked for the rest, though the first began in a directory not there yet:
        // less than the 600,000 bytes sent before the drop plus the whole file again (what of
        // the first answer reached the disk depends on what the drop discarded in flight).
        #expect(bench.origin.requests("/movies/broken.mp4") == 2)
        #expect(bench.origin.bytesServed("/movies/broken.mp4") < 1_600_000)
        await bench.stop()
    }

    @Test func aSizeOtherThanTheCatalogueDeclaresCompletesWithAWarning() async throws {
        let bench = try await DownloadBench.start()
        bench.origin.serve("/movies/short.mp4", TestOrigin.content(40_000))
        bench.origin.serve("/movies/exact.mp4", TestOrigin.content(30_000))
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "short", url: bench.origin.url("/movies/short.mp4"), declaredSize: 50_000))
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "exact", url: bench.origin.url("/movies/exact.mp4"), declaredSize: 30_000))
        #expect(try await bench.waitForOutcome("short").state == .completed)
        #expect(try await bench.waitForOutcome("exact").state == .completed)
        let warnings = bench.events.all.compactMap { event -> String? in
            if case .downloadWarning(let assetId, let message) = event { "\(assetId): \(message)" } else { nil }
        }
        #expect(warnings == ["short: Completed at 40000 bytes; the catalogue declares 50000."])
        // The event log carries it to the backplane.
        _ = try await bench.engine.uploadEvents()
        let logged = try await bench.server.storedEvents(EventFilter(type: .downloadWarning))
        #expect(logged.map(\.event.content.assetId) == ["short"])
        #expect(logged.first?.event.content.errorCode == "sizeMismatch")
        await bench.stop()
    }

    @Test func theHLSAssetDownloadsTheChosenStreamsAndPlaysFromLocalFilesOnly() async throws {
        let bench = try await DownloadBench.start()
        let hls = TestHLSAsset(serving: bench.origin)
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "show", url: bench.origin.url("/hls/master.m3u8"), kind: .hls, allowedMIMETypes: TestHLSAsset.mediaTypes,
            maxVideoBitrate: 1_500_000, audioLanguages: ["en"]))
        let asset = try await bench.waitForOutcome("show")
        #expect(asset.state == .completed)
        let index = try #require(asset.localURL)
        #expect(index.lastPathComponent == "index.m3u8")
        let directory = index.deletingLastPathComponent()
        let tree = try LocalPlaylistTree(index: index)
        // Only local files, and every one of them there.
        for reference in tree.allReferences {
            #expect(!reference.contains(":"), "\(reference) is not a local path")
            #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent(reference).path), "\(reference) is missing")
        }
        // The master lists the mid variant, English audio and the subtitles, nothing else.
        let master = try String(contentsOf: index, encoding: .utf8)
        #expect(master.contains("BANDWIDTH=1200000") && !master.contains("BANDWIDTH=400000") && !master.contains("BANDWIDTH=3000000"))
        #expect(master.contains("LANGUAGE=\"en\"") && !master.contains("LANGUAGE=\"de\""))
        #expect(master.contains("TYPE=SUBTITLES"))
        // Byte for byte what the origin served: each byte-range segment cut out, the init
        // section, the key, audio and subtitles.
        let video = try #require(tree.references["video.m3u8"])
        let segments = video.filter { !$0.hasSuffix(".key") && !$0.contains("init-") }
        #expect(segments.count == hls.segments)
        for (index, path) in segments.enumerated() {
            #expect(try Data(contentsOf: directory.appendingPathComponent(path)) == hls.videoSegment("mid", index), "\(path)")
        }
        let initPath = try #require(video.first { $0.contains("init-") })
        #expect(try Data(contentsOf: directory.appendingPathComponent(initPath)) == hls.files["/hls/mid/init.mp4"])
        let keyPath = try #require(video.first { $0.hasSuffix(".key") })
        // The key is sealed on disk (`KeyVault`): 32 bytes more, and not the key's bytes.
        let key = try #require(hls.files["/hls/keys/k1.key"])
        let sealedKey = try Data(contentsOf: directory.appendingPathComponent(keyPath))
        #expect(sealedKey.count == key.count + 32 && sealedKey.range(of: key) == nil)
        let audio = try #require(tree.references.first { $0.key.hasPrefix("audio") }?.value)
        for (index, path) in audio.enumerated() {
            #expect(try Data(contentsOf: directory.appendingPathComponent(path)) == hls.files["/hls/audio/en/\(index).aac"])
        }
        #expect(bench.origin.requests(under: "/hls/audio/de").isEmpty)
        #expect(bench.origin.requests(under: "/hls/high").isEmpty && bench.origin.requests(under: "/hls/low").isEmpty)
        // The originals are kept beside the local playlists.
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("original/asset.m3u8").path))
        // The size is what is on disk.
        let onDisk = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.fileSizeKey])!
            .compactMap { ($0 as? URL) }.filter { !$0.path.contains("/original/") && !$0.hasDirectoryPath }
            .reduce(Int64(0)) { $0 + Int64((try? $1.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0) }
        #expect(asset.bytesDownloaded == onDisk)
        await bench.stop()
    }

    @Test(arguments: [(0 as Int?, "low"), (1_500_000, "mid"), (nil, "high")])
    func theVariantIsTheHighestNotAboveTheLimit(maxBitrate: Int?, variant: String) async throws {
        let bench = try await DownloadBench.start()
        try await bench.engine.downloads.setEnabled(false)
        _ = TestHLSAsset(serving: bench.origin)
        let asset = try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "show", url: bench.origin.url("/hls/master.m3u8"), kind: .hls, maxVideoBitrate: maxBitrate, audioLanguages: []))
        // Queueing fetched the chosen variant's playlist only; the estimate is its bandwidth × duration.
        let fetched = bench.origin.requests(under: "/hls/").keys.filter { $0.hasSuffix("video.m3u8") }
        #expect(fetched == ["/hls/\(variant)/video.m3u8"])
        #expect(asset.state == .blocked(.switchedOff))
        #expect(bench.origin.requests(under: "/hls/audio").isEmpty)
        await bench.stop()
    }

    @Test func aFileFailingTwiceCompletesInOnePass() async throws {
        let bench = try await DownloadBench.start()
        bench.origin.serve("/flaky.mp4", TestOrigin.content(100_000))
        bench.origin.inject(.failFirst(2, status: 503), at: "/flaky.mp4")
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "flaky", url: bench.origin.url("/flaky.mp4")))
        let asset = try await bench.waitForOutcome("flaky")
        #expect(asset.state == .completed)
        #expect(bench.origin.requests("/flaky.mp4") == 3)
        #expect(bench.events.count("downloadError") == 0)
        await bench.stop()
    }

    @Test func aFileThatAlwaysFailsFailsTheAssetAfterThreePassesUntilItsRetriesAreCleared() async throws {
        let bench = try await DownloadBench.start()
        let hls = TestHLSAsset(serving: bench.origin)
        bench.origin.inject(.failFirst(1_000, status: 500), at: "/hls/audio/en/2.aac")
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "show", url: bench.origin.url("/hls/master.m3u8"), kind: .hls, maxVideoBitrate: 0, audioLanguages: ["en"]))
        let failed = try await bench.waitForOutcome("show")
        guard case .failed(let failure) = failed.state else { Issue.record("\(failed.state)"); return }
        #expect(failure.kind == .http && failure.status == 500)
        #expect(failed.errorCount == 3)
        // Three tries in a row, in each of three passes.
        #expect(bench.origin.requests("/hls/audio/en/2.aac") == 9)
        // Events arrive on their own stream: wait for the last one before reading them all.
        try await bench.events.wait(for: "downloadError") { if case .downloadError(_, _, false) = $0 { true } else { false } }
        let errors = bench.events.all.compactMap { event -> Bool? in
            if case .downloadError(_, _, let willRetry) = event { willRetry } else { nil }
        }
        #expect(errors == [true, true, false])
        try await Task.sleep(for: .milliseconds(300))
        #expect(bench.origin.requests("/hls/audio/en/2.aac") == 9, "a failed asset is not tried again")

        bench.origin.inject(nil, at: "/hls/audio/en/2.aac")
        try await bench.engine.downloads.clearRetries(assetId: "show")
        let completed = try await bench.waitForOutcome("show")
        #expect(completed.state == .completed)
        // Completed segments were not fetched again across the passes.
        #expect(bench.origin.requests("/hls/low/init.mp4") == 1)
        #expect(bench.origin.requests("/hls/audio/en/0.aac") == 1)
        _ = hls
        await bench.stop()
    }

    @Test func aWrongMIMETypeFailsAtOnceAndStoresNothing() async throws {
        let bench = try await DownloadBench.start()
        bench.origin.serve("/portal.mp4", Data("<html>Sign in to the Wi-Fi</html>".utf8), contentType: "text/html")
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "portal", url: bench.origin.url("/portal.mp4"), allowedMIMETypes: ["video/mp4"]))
        let asset = try await bench.waitForOutcome("portal")
        guard case .failed(let failure) = asset.state else { Issue.record("\(asset.state)"); return }
        #expect(failure.kind == .mimeType)
        #expect(bench.origin.requests("/portal.mp4") == 1)
        let files = FileManager.default.enumerator(at: bench.dataDirectory.appendingPathComponent("content"), includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL }.filter { !$0.hasDirectoryPath } ?? []
        #expect(files.isEmpty, "\(files)")
        await bench.stop()
    }

    @Test func badRequestsAreRefusedAndQueueNothing() async throws {
        let bench = try await DownloadBench.start()
        let downloads = bench.engine.downloads
        bench.origin.serve("/portal.m3u8", Data("<!DOCTYPE html><html>Sign in</html>".utf8), contentType: "text/html")
        bench.origin.serve("/broken.m3u8", Data("#EXTM3U\n#EXTINF:six,\nsegment.ts\n".utf8))
        bench.origin.serve("/live.m3u8", Data("#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXTINF:6,\nsegment.ts\n".utf8))
        let refused: [(DownloadRequest, BackplaneClientError.Kind, String)] = [
            (DownloadRequest(assetId: "", url: bench.origin.url("/a.mp4")), .invalidInput, "empty"),
            (DownloadRequest(assetId: "a", url: URL(string: "ftp://example.com/a.mp4")!), .invalidInput, "http"),
            (DownloadRequest(assetId: "a", url: URL(fileURLWithPath: "/etc/passwd")), .invalidInput, "http"),
            (DownloadRequest(assetId: "a", url: bench.origin.url("/portal.m3u8"), kind: .hls), .download, "#EXTM3U"),
            (DownloadRequest(assetId: "a", url: bench.origin.url("/broken.m3u8"), kind: .hls), .download, "Malformed"),
            (DownloadRequest(assetId: "a", url: bench.origin.url("/live.m3u8"), kind: .hls), .download, "live"),
            (DownloadRequest(assetId: "a", url: bench.origin.url("/missing.m3u8"), kind: .hls), .download, "404"),
        ]
        for (request, kind, words) in refused {
            do {
                try await downloads.enqueue(request)
                Issue.record("\(request.url) was queued")
            } catch let error as BackplaneClientError {
                #expect(error.kind == kind, "\(error)")
                #expect(error.message.contains(words), "\(error.message)")
            }
        }
        #expect(try await downloads.queue().isEmpty)
        let content = bench.dataDirectory.appendingPathComponent("content")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: content.path)) ?? []).isEmpty)
        await bench.stop()
    }

    @Test func anEngineStoppedMidDownloadGoesOnWithoutFetchingCompletedFilesAgain() async throws {
        let dataDirectory = temporaryDirectory("sdk-download-resume")
        let first = try await DownloadBench.start(dataDirectory: dataDirectory) { $0.parallelFiles = 2 }
        try await first.startSlowShow(segments: 40, segmentBytes: 30_000, until: 300_000)
        await first.engine.shutdown()
        let beforeRestart = first.origin.requests(under: "/hls/")
        #expect((beforeRestart["/hls/low/segments.mp4"] ?? 0) < 40, "the stop came too late to test a resume")

        let second = try await DownloadBench.start(dataDirectory: dataDirectory, server: first.server, origin: first.origin)
        let asset = try await second.waitForOutcome("show")
        #expect(asset.state == .completed)
        let served = first.origin.bytesServed(under: "/hls/low/") + first.origin.bytesServed(under: "/hls/audio/en/")
            + first.origin.bytesServed(under: "/hls/keys/")
        #expect(Double(served) <= 1.1 * Double(asset.bytesDownloaded))
        // Each file was fetched once (40 ranges of segments.mp4), but for the two in flight at
        // the stop, which were resumed; the playlists were fetched once, when queued.
        let requests = first.origin.requests(under: "/hls/")
        var extra = (requests["/hls/low/segments.mp4"] ?? 0) - 40
        for (path, count) in requests where path != "/hls/low/segments.mp4" { extra += count - 1 }
        #expect(extra <= 2, "\(requests.filter { $0.value > 1 })")
        await second.stop()
    }

    /// Queueing makes the plan (the origin's playlists fetched and parsed once) and keeps it;
    /// the download carries it out without reading a playlist again: with the fetched copies
    /// gone, it completes, and the origin is not asked for a playlist twice.
    @Test func anHLSDownloadIsCarriedOutFromThePlanMadeWhenItWasQueued() async throws {
        let bench = try await DownloadBench.start()
        try await bench.engine.downloads.setEnabled(false)
        let hls = TestHLSAsset(serving: bench.origin, segments: 4)
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "show", url: bench.origin.url("/hls/master.m3u8"), kind: .hls, maxVideoBitrate: 0, audioLanguages: ["en"],
            subtitleLanguages: []))
        let content = bench.dataDirectory.appendingPathComponent("content")
        let kept = (FileManager.default.enumerator(at: content, includingPropertiesForKeys: nil)?.allObjects as? [URL] ?? [])
            .filter { $0.deletingLastPathComponent().lastPathComponent == "original" }
        let plan = try #require(kept.first { $0.lastPathComponent == "plan.json" }, "no plan kept: \(kept)")
        for file in kept where file.pathExtension == "m3u8" { try FileManager.default.removeItem(at: file) }
        let playlists = { bench.origin.requests(under: "/hls/").filter { $0.key.hasSuffix(".m3u8") } }
        let queued = playlists()
        #expect(Set(queued.keys) == ["/hls/master.m3u8", "/hls/low/video.m3u8", "/hls/audio/en.m3u8"])
        #expect(queued.values.allSatisfy { $0 == 1 }, "\(queued)")

        try await bench.engine.downloads.setEnabled(true)
        let asset = try await bench.waitForOutcome("show")
        #expect(asset.state == .completed)
        #expect(playlists() == queued, "a playlist was fetched again: \(playlists())")
        #expect(FileManager.default.fileExists(atPath: plan.path))
        let index = try #require(asset.localURL)
        let tree = try LocalPlaylistTree(index: index)
        #expect(!tree.references.isEmpty)
        _ = hls
        await bench.stop()
    }
}
