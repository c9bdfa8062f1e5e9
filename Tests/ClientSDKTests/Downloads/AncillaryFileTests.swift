import ClientSDK
import Foundation
import Testing
import TestSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Files that travel with a title: downloaded with it, counted in its size, listed on it,
/// served by the playback server and deleted with it; one that fails is reported and the title
/// completes.
@Suite struct AncillaryFileTests {
    @Test func artworkAndASidecarTravelWithTheTitleAndAFailedOneIsReported() async throws {
        let bench = try await DownloadBench.start()
        let hls = TestHLSAsset(serving: bench.origin, segments: 3)
        let poster = TestOrigin.content(30_000, seed: 61)
        let sidecar = Data(#"{"title":"The Long Game","episode":7}"#.utf8)
        bench.origin.serve("/art/poster.jpg", poster, contentType: "image/jpeg")
        bench.origin.serve("/art/info.json", sidecar, contentType: "application/json")
        let request = DownloadRequest(
            assetId: "show", url: bench.origin.url("\(hls.prefix)/master.m3u8"), kind: .hls,
            // The asset's own types only: ancillary files are not media, and are not held to them.
            allowedMIMETypes: TestHLSAsset.mediaTypes, maxVideoBitrate: 0, audioLanguages: ["en"], subtitleLanguages: [],
            ancillaries: [
                AncillaryFile(tag: "poster", url: bench.origin.url("/art/poster.jpg")),
                AncillaryFile(tag: "sidecar", url: bench.origin.url("/art/info.json")),
                AncillaryFile(tag: "thumbnails", url: bench.origin.url("/art/missing.vtt")),
            ])
        let queued = try await bench.engine.downloads.enqueue(request)
        let show = try await bench.waitForOutcome("show")
        #expect(show.state == .completed, "\(String(describing: show.lastFailure))")
        #expect(show.errorCount == 0)
        // The failed one is reported, once, and left out.
        let warning = try await bench.events.wait(for: "downloadWarning")
        #expect("\(warning)".contains("thumbnails"), "\(warning)")
        #expect(show.ancillaries.map(\.tag) == ["poster", "sidecar"])
        #expect(try Data(contentsOf: show.ancillaries[0].localURL) == poster)
        #expect(try Data(contentsOf: show.ancillaries[1].localURL) == sidecar)
        // Counted in the asset's size and its estimate.
        let without = try await bench.engine.downloads.estimate(DownloadRequest(
            assetId: "bare", url: request.url, kind: .hls, maxVideoBitrate: 0, audioLanguages: ["en"], subtitleLanguages: []))
        #expect(try #require(queued.estimatedBytes) >= without.bytes + Int64(poster.count + sidecar.count))
        let files = try FileManager.default.subpathsOfDirectory(atPath: show.localURL!.deletingLastPathComponent().path)
        #expect(files.contains("ancillary/poster.jpg") && !files.contains { $0.contains("missing") || $0.hasSuffix(".partial") }, "\(files)")
        #expect(show.bytesDownloaded >= Int64(poster.count + sidecar.count) + 3 * 20_000)

        // Served by the playback server, typed, and without the rights door.
        let url = try await bench.engine.playback.url(for: "show", ancillary: "poster")
        let (served, response) = try await URLSession.shared.data(from: url)
        #expect(served == poster && (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Content-Type") == "image/jpeg")
        await #expect(throws: BackplaneClientError.self) { try await bench.engine.playback.url(for: "show", ancillary: "thumbnails") }

        // Deleted with the asset.
        let directory = show.localURL!.deletingLastPathComponent()
        try await bench.engine.downloads.remove(assetId: "show")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("ancillary").path))
        await bench.stop()
    }

    @Test func ancillaryFilesAreCheckedWhenQueued() async throws {
        let bench = try await DownloadBench.start()
        let url = bench.origin.url("/film.mp4")
        let bad: [[AncillaryFile]] = [
            [AncillaryFile(tag: "../up", url: url)],
            [AncillaryFile(tag: "", url: url)],
            [AncillaryFile(tag: "a", url: url), AncillaryFile(tag: "a", url: url)],
            [AncillaryFile(tag: "poster", url: URL(string: "file:///etc/passwd")!)],
            (0...AncillaryFile.maxPerAsset).map { AncillaryFile(tag: "t\($0)", url: url) },
        ]
        for files in bad {
            await #expect(throws: BackplaneClientError.self, "\(files.prefix(2))") {
                try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "film", url: url, ancillaries: files))
            }
        }
        #expect(try await bench.engine.downloads.queue().isEmpty)
        await bench.stop()
    }
}
