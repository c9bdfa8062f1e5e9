@testable import ClientSDK
import Foundation
import Testing

/// Adjacent byte ranges of one file go in one request, each still a local file of its own;
/// what a broken or refused run did not bring comes part by part.
@Suite struct RangeRunTests {
    /// Downloads the lowest variant of a byte-range HLS title (30 parts of one file) and checks
    /// every part on disk against the origin's bytes.
    private func download(_ bench: DownloadBench, _ hls: TestHLSAsset) async throws {
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "show", url: bench.origin.url("/hls/master.m3u8"), kind: .hls, maxVideoBitrate: 0, audioLanguages: [],
            subtitleLanguages: []))
        let asset = try await bench.waitForOutcome("show", timeout: .seconds(120))
        #expect(asset.state == .completed)
        let directory = try #require(asset.localURL).deletingLastPathComponent()
        for index in 0..<hls.segments {
            let local = try Data(contentsOf: directory.appendingPathComponent("video/\(index).mp4"))
            #expect(local == hls.videoSegment("low", index), "part \(index)")
        }
    }

    @Test func adjacentRangesOfOneFileGoInOneRequest() async throws {
        let bench = try await DownloadBench.start()
        let hls = TestHLSAsset(serving: bench.origin, segments: 30, segmentBytes: 20_000)
        try await download(bench, hls)
        #expect(bench.origin.requests("/hls/low/segments.mp4") == 1)
        #expect(bench.origin.bytesServed("/hls/low/segments.mp4") == 30 * 20_000)
        await bench.stop()
    }

    @Test func aRunThatBreaksOffLeavesItsWholePartsAndFetchesTheRestAlone() async throws {
        let bench = try await DownloadBench.start(options: { $0.waitBeforeRetry = { _ in } })
        let hls = TestHLSAsset(serving: bench.origin, segments: 30, segmentBytes: 20_000)
        // The run's answer stops in the middle of its 13th part. (Paced, so that the client
        // reads what is sent as it comes; how much the drop takes with it unread is the
        // machine's timing, so the test asserts what holds whatever it took.)
        bench.origin.throttle(bytesPerSecond: 500_000)
        bench.origin.inject(.dropAfter(bytes: 250_000, times: 1), at: "/hls/low/segments.mp4")
        try await download(bench, hls)
        // One run, then the parts it did not finish, each alone: a suffix of the title, so
        // no part the run brought whole (at most 12) was asked for again.
        let alone = bench.origin.asked(under: "/hls/low/segments.mp4").dropFirst().compactMap { Self.start(of: $0.headers[.range]) }
        let firstAlone = alone.min() ?? 30 * 20_000
        #expect(alone.sorted() == Array(stride(from: firstAlone, to: 30 * 20_000, by: 20_000)), "\(alone)")
        #expect(firstAlone >= 20_000 && firstAlone <= 12 * 20_000, "the run brought \(firstAlone / 20_000) parts whole")
        #expect(bench.origin.bytesServed("/hls/low/segments.mp4") == 250_000 + alone.count * 20_000)
        await bench.stop()
    }

    /// The first byte a `Range` header asks for.
    static func start(of range: String?) -> Int? {
        range.flatMap { $0.dropFirst("bytes=".count).split(separator: "-").first.flatMap { Int($0) } }
    }

    @Test func aPartCutShortPastItsMidwayResumes() async throws {
        let bench = try await DownloadBench.start(options: { $0.waitBeforeRetry = { _ in } })
        let hls = TestHLSAsset(serving: bench.origin, segments: 10, segmentBytes: 400_000)
        // The run stops 300,000 bytes into its second part (less what the drop takes unread):
        // past the point where a part's resume information is written, so that part goes on
        // from where it stopped.
        bench.origin.throttle(bytesPerSecond: 2_000_000)
        bench.origin.inject(.dropAfter(bytes: 700_000, times: 1), at: "/hls/low/segments.mp4")
        try await download(bench, hls)
        let asked = bench.origin.asked(under: "/hls/low/segments.mp4").map { $0.headers[.range] ?? "" }
        #expect(asked.count == 1 + 9, "\(asked)")
        let resumed = asked.dropFirst().compactMap { Self.start(of: $0) }.first { $0 > 400_000 && $0 < 800_000 }
        #expect(resumed.map { $0 >= 400_000 + 65_536 } == true, "the second part resumed at \(String(describing: resumed)): \(asked)")
        // Nothing asked twice: after the run, only what it did not bring.
        let later = asked.dropFirst().compactMap { range -> Int? in
            let bounds = range.dropFirst("bytes=".count).split(separator: "-").compactMap { Int($0) }
            return bounds.count == 2 ? bounds[1] - bounds[0] + 1 : nil
        }.reduce(0, +)
        #expect(later == 4_000_000 - (resumed ?? 0), "\(asked)")
        await bench.stop()
    }

    @Test func anOriginThatIgnoresRangesCostsOneRequest() async throws {
        let bench = try await DownloadBench.start()
        let hls = TestHLSAsset(serving: bench.origin, segments: 6, segmentBytes: 20_000)
        bench.origin.inject(.ignoreRange, at: "/hls/low/segments.mp4")
        try await download(bench, hls)
        // The whole file for the run (refused), then for each part alone, as before runs.
        #expect(bench.origin.requests("/hls/low/segments.mp4") == 1 + 6)
        await bench.stop()
    }

    @Test func runsAreBoundedAndOnlyJoinNewAdjacentParts() {
        let url = URL(string: "https://cdn.example/film.mp4")!
        func part(_ offset: Int, _ length: Int, url: URL = url, rule: FileSizeRule? = nil) -> DownloadFile {
            DownloadFile(url: url, byteRange: ByteRange(length: length, offset: offset), relativePath: "v/\(offset)", isMedia: true, sizeRule: rule)
        }
        let mib = 1 << 20
        let files = [
            part(0, 1000, rule: .initSection),  // an init section: alone
            part(1000, mib), part(1000 + mib, mib), part(1000 + 2 * mib, mib), part(1000 + 3 * mib, mib),  // 4 MiB: one run
            part(1000 + 4 * mib, mib),  // past the bound: a new run
            part(1000 + 5 * mib, 500),
            part(1000 + 5 * mib + 600, 500),  // a gap: a new run
            part(1000 + 5 * mib + 1100, 500, url: URL(string: "https://cdn.example/other.mp4")!),  // another file
            part(1000 + 5 * mib + 1600, 500, url: URL(string: "https://cdn.example/other.mp4")!),
            part(1000 + 5 * mib + 2100, 500, url: URL(string: "https://cdn.example/other.mp4")!),  // partly on disk: alone
        ]
        let units = RangeRuns.units(of: files) { $0 != 10 }
        #expect(units == [[0], [1, 2, 3, 4], [5, 6], [7], [8, 9], [10]])
    }
}
