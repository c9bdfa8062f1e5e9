@testable import ClientSDK
import Foundation
import Testing
import TestSupport

/// Downloads written without flushes (the default) and a restart of the system between two
/// runs of the app: what a crash can have cut short is found and downloaded again, and nothing
/// else is. The restart is stood in by the engine's boot session.
@Suite struct SystemRestartTests {
    /// Without it the engine flushes every file (and this suite's restarts prove nothing there).
    @Test func theRunOfTheSystemIsKnownAndStaysTheSame() {
        let run = BootSession.current()
        #expect(run != nil)
        #expect(run == BootSession.current())
    }

    @Test func aCompletedDownloadCutShortByASystemCrashIsDownloadedAgainAndAnIntactOneIsKept() async throws {
        let dataDirectory = temporaryDirectory("sdk-restart-completed")
        let first = try await DownloadBench.start(dataDirectory: dataDirectory) { $0.bootSession = { "run-1" } }
        let movie = TestOrigin.content(600_000, seed: 5)
        let trailer = TestOrigin.content(200_000, seed: 6)
        first.origin.serve("/movies/movie.mp4", movie)
        first.origin.serve("/movies/trailer.mp4", trailer)
        _ = TestHLSAsset(serving: first.origin, segments: 6, segmentBytes: 10_000)
        for name in ["movie", "trailer"] {
            try await first.engine.downloads.enqueue(DownloadRequest(assetId: name, url: first.origin.url("/movies/\(name).mp4")))
        }
        // An HLS asset too: its size counts keys and local playlists, not the originals.
        try await first.engine.downloads.enqueue(DownloadRequest(assetId: "show", url: first.origin.url("/hls/master.m3u8"), kind: .hls))
        let cut = try #require(try await first.waitForOutcome("movie").localURL)
        #expect(try await first.waitForOutcome("trailer").state == .completed)
        let show = try #require(try await first.waitForOutcome("show").localURL).deletingLastPathComponent()
        await first.engine.shutdown()
        let hlsRequests = first.origin.requests(under: "/hls/")
        // What a kill between a file's rename and its resume file's removal leaves: not the asset's bytes.
        try Data("{}".utf8).write(to: show.appendingPathComponent("video/0.mp4.partial-info"))
        // The system stopped before the movie's last pages reached the disk.
        let handle = try FileHandle(forWritingTo: cut)
        try handle.truncate(atOffset: 250_000)
        try handle.close()

        let second = try await DownloadBench.start(dataDirectory: dataDirectory, server: first.server, origin: first.origin) {
            $0.bootSession = { "run-2" }
        }
        try await second.events.wait(for: "downloadWarning")
        let again = try await second.waitForOutcome("movie")
        #expect(again.state == .completed)
        let file = try #require(again.localURL)
        #expect(try Data(contentsOf: file) == movie)
        #expect(first.origin.requests("/movies/movie.mp4") == 2)
        // The trailer's and the show's files add up: they are not fetched again, and stay completed.
        #expect(first.origin.requests("/movies/trailer.mp4") == 1)
        #expect(first.origin.requests(under: "/hls/") == hlsRequests)
        #expect(try await second.engine.downloads.asset("trailer")?.state == .completed)
        #expect(try await second.engine.downloads.asset("show")?.state == .completed)
        await second.engine.shutdown()

        // The movie, downloaded again in run 2, was flushed at this start in the same run: a
        // later restart of the system finds nothing to doubt, even with its file cut short.
        let third = try await DownloadBench.start(dataDirectory: dataDirectory, server: first.server, origin: first.origin) {
            $0.bootSession = { "run-2" }
        }
        try await third.wait("the engine idle") { try await third.engine.downloads.status() == .idle }
        await third.engine.shutdown()
        let handle2 = try FileHandle(forWritingTo: cut)
        try handle2.truncate(atOffset: 100_000)
        try handle2.close()
        let fourth = try await DownloadBench.start(dataDirectory: dataDirectory, server: first.server, origin: first.origin) {
            $0.bootSession = { "run-3" }
        }
        try await fourth.wait("the engine idle") { try await fourth.engine.downloads.status() == .idle }
        #expect(first.origin.requests("/movies/movie.mp4") == 2)
        #expect(fourth.events.count("downloadWarning") == 0)
        await fourth.stop()
    }

    @Test func aDownloadUnderWayAtASystemCrashStartsOverAndOneStoppedCleanlyGoesOn() async throws {
        let dataDirectory = temporaryDirectory("sdk-restart-queued")
        let first = try await DownloadBench.start(dataDirectory: dataDirectory) {
            $0.parallelFiles = 2
            $0.bootSession = { "run-1" }
        }
        let hls = try await first.startSlowShow(segments: 30, segmentBytes: 20_000, until: 200_000)
        // A clean stop flushes what was written: after a restart of the system it goes on.
        await first.engine.shutdown()
        let videoAtStop = first.origin.requests("/hls/low/segments.mp4")
        #expect(videoAtStop < 30, "the stop came too late to test a resume")
        let second = try await DownloadBench.start(dataDirectory: dataDirectory, server: first.server, origin: first.origin) {
            $0.parallelFiles = 2
            $0.bootSession = { "run-2" }
        }
        try await second.wait("the video's end") { first.origin.requests(under: "/hls/audio/en/").count > 2 }
        // The 30 video segments (ranges of one file) once each, but for the two in flight at the stop.
        #expect(first.origin.requests("/hls/low/segments.mp4") <= 32, "segments complete at the stop were fetched again")

        // Now the app is killed and the system crashes: the files written since are of
        // unknown length (one is cut short here), and the download starts over.
        await second.engine.shutdown()
        let directory = dataDirectory.appendingPathComponent("content")
            .appendingPathComponent(ContentStore.directoryName(for: "show"))
        let written = try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("audio-0").path)
        let victim = try #require(written.first { !$0.contains(".partial") })
        let handle = try FileHandle(forWritingTo: directory.appendingPathComponent("audio-0").appendingPathComponent(victim))
        try handle.truncate(atOffset: 10)
        try handle.close()
        // What a kill before the clean stop's flush leaves listed.
        try SDKDatabase(directory: dataDirectory).save(UnflushedDownloads(assetIdsByBoot: ["run-2": ["show"]]), .unflushedDownloads)
        let audioBefore = first.origin.requests(under: "/hls/audio/en/")

        let third = try await DownloadBench.start(dataDirectory: dataDirectory, server: first.server, origin: first.origin) {
            $0.parallelFiles = 2
            $0.bootSession = { "run-3" }
        }
        let asset = try await third.waitForOutcome("show")
        #expect(asset.state == .completed)
        // Every audio file fetched again, and each equal to the origin's.
        let refetched = (0..<30).filter { first.origin.requests("/hls/audio/en/\($0).aac") > audioBefore["/hls/audio/en/\($0).aac", default: 0] }
        #expect(refetched.count == 30)
        let index = try #require(asset.localURL)
        let audio = try #require(try LocalPlaylistTree(index: index).references.first { $0.key.hasPrefix("audio") }?.value)
        for (index, path) in audio.enumerated() {
            #expect(try Data(contentsOf: directory.appendingPathComponent(path)) == hls.files["/hls/audio/en/\(index).aac"], "\(path)")
        }
        await third.stop()
    }
}
