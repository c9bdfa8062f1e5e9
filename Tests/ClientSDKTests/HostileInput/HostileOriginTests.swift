import ClientSDK
import Foundation
import Testing
import TestSupport

/// The SDK against an origin that lies: playlists and answers crafted to trap arithmetic, use
/// unbounded disk, stall the queue or hang it. Each attack fails its asset with a clear
/// `DownloadFailure` (or is harmless), the process lives, and a normal download in the same
/// data directory still works afterwards. One test at a time: each starts a backplane, an
/// engine and two origins, and all at once they would crowd out the suite's timing tests.
@Suite(.serialized) struct HostileOriginTests {
    static let playlistType = "application/vnd.apple.mpegurl"

    /// A media playlist whose segments are all one small file the origin serves.
    static func media(_ body: String, header: String = "#EXT-X-TARGETDURATION:6") -> String {
        "#EXTM3U\n\(header)\n\(body)\n#EXT-X-ENDLIST\n"
    }

    /// Queues `request`; the failure that refused it, or nil when it was queued.
    static func refusal(_ engine: BackplaneEngine, _ request: DownloadRequest) async throws -> DownloadFailure? {
        do {
            try await engine.downloads.enqueue(request)
            return nil
        } catch let error as BackplaneClientError where error.kind == .download {
            return try #require(error.downloadFailure)
        }
    }

    /// A plain file served well by `origin`, downloaded in the bench's data directory.
    static func normalDownloadWorks(_ bench: DownloadBench, _ origin: HostileOrigin, assetId: String = "afterwards", bytes: Int = 300_000) async throws {
        let movie = TestOrigin.content(bytes, seed: 42)
        origin.serve("/\(assetId).mp4", movie)
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: assetId, url: origin.url("/\(assetId).mp4")))
        let asset = try await bench.waitForOutcome(assetId)
        #expect(asset.state == .completed)
        #expect(try Data(contentsOf: try #require(asset.localURL)) == movie)
    }

    static let trappingMediaPlaylists: [(String, String)] = [
        // The attacks found: each trapped (exit 132) before.
        ("an implicit byte range past Int64.max",
         media("#EXTINF:6,\n#EXT-X-BYTERANGE:9223372036854775807@0\nv.ts\n#EXTINF:6,\n#EXT-X-BYTERANGE:1\nv.ts")),
        ("a media sequence at Int64.max", media("#EXTINF:6,\na.ts\n#EXTINF:6,\nb.ts", header: "#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:9223372036854775807")),
        // Variants: other tags, other integer fields, negative and floating-point forms.
        ("an explicit offset past Int64.max", media("#EXTINF:6,\n#EXT-X-BYTERANGE:100@9223372036854775800\nv.ts")),
        ("a negative length", media("#EXTINF:6,\n#EXT-X-BYTERANGE:-1@0\nv.ts")),
        ("a negative offset", media("#EXTINF:6,\n#EXT-X-BYTERANGE:10@-1\nv.ts")),
        ("a length past Int64", media("#EXTINF:6,\n#EXT-X-BYTERANGE:99999999999999999999@0\nv.ts")),
        ("a floating-point length", media("#EXTINF:6,\n#EXT-X-BYTERANGE:1.5@0\nv.ts")),
        ("a signed length", media("#EXTINF:6,\n#EXT-X-BYTERANGE:+10@0\nv.ts")),
        ("a negative media sequence", media("#EXTINF:6,\na.ts", header: "#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:-5")),
        ("a media sequence past Int64", media("#EXTINF:6,\na.ts", header: "#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:9223372036854775808")),
        ("a floating-point target duration", media("#EXTINF:6,\na.ts", header: "#EXT-X-TARGETDURATION:6.5")),
        ("an infinite duration", media("#EXTINF:1e309,\na.ts")),
        ("a NaN duration", media("#EXTINF:nan,\na.ts")),
        ("a negative duration", media("#EXTINF:-6,\na.ts")),
        ("an init section range past Int64.max",
         media("#EXT-X-MAP:URI=\"i.mp4\",BYTERANGE=\"9223372036854775807@9223372036854775807\"\n#EXTINF:6,\na.ts")),
    ]

    @Test func playlistsWhoseNumbersTrappedFailTheirAssetAndTheEngineGoesOn() async throws {
        let bench = try await DownloadBench.start()
        let origin = try await HostileOrigin.start()
        for (index, (what, text)) in Self.trappingMediaPlaylists.enumerated() {
            origin.serve("/p\(index).m3u8", Data(text.utf8), contentType: Self.playlistType)
            let failure = try await Self.refusal(bench.engine, DownloadRequest(assetId: "p\(index)", url: origin.url("/p\(index).m3u8"), kind: .hls))
            #expect(failure?.kind == .playlist, "\(what): \(String(describing: failure))")
        }
        try await Self.normalDownloadWorks(bench, origin)
        await origin.stop()
        await bench.stop()
    }

    @Test func variantBandwidthsOfAnySizeAreReadOrRefusedNeverTrapped() async throws {
        let bench = try await DownloadBench.start()
        let origin = try await HostileOrigin.start()
        let segment = TestOrigin.content(10_000, seed: 5)
        origin.serve("/s.ts", segment, contentType: "video/mp2t")
        origin.serve("/v.m3u8", Data(Self.media("#EXTINF:6,\ns.ts\n#EXTINF:6,\ns.ts").utf8), contentType: Self.playlistType)
        let usable = ["BANDWIDTH=9223372036854775807", "BANDWIDTH=1,AVERAGE-BANDWIDTH=9223372036854775807"]
        let refused = ["BANDWIDTH=-1", "BANDWIDTH=1.5e9", "BANDWIDTH=99999999999999999999", "BANDWIDTH=1,AVERAGE-BANDWIDTH=-7"]
        for (index, attributes) in (usable + refused).enumerated() {
            origin.serve("/m\(index).m3u8", Data("#EXTM3U\n#EXT-X-STREAM-INF:\(attributes)\nv.m3u8\n".utf8), contentType: Self.playlistType)
            let request = DownloadRequest(assetId: "m\(index)", url: origin.url("/m\(index).m3u8"), kind: .hls)
            let failure = try await Self.refusal(bench.engine, request)
            if index < usable.count {
                // The size estimate (bandwidth × duration) trapped here: now there is none.
                #expect(failure == nil, "\(attributes)")
                let asset = try await bench.waitForOutcome("m\(index)")
                #expect(asset.state == .completed, "\(attributes)")
                #expect(asset.bytesDownloaded >= 20_000)
            } else {
                #expect(failure?.kind == .playlist, "\(attributes): \(String(describing: failure))")
            }
        }
        await origin.stop()
        await bench.stop()
    }

    /// A flat file whose first answer stops half-way and whose resume is answered with the
    /// `Content-Range` that `contentRange` makes of the first byte asked for.
    private static func resumeAnsweredWith(_ contentRange: @escaping @Sendable (Int) -> String, body: Data) -> HostileOrigin.Script {
        { head, attempt in
            if attempt == 1 {
                return [.bytes(HostileOrigin.answer(headers: ["Content-Type": "video/mp4", "Content-Length": "\(body.count)", "ETag": "\"e1\""],
                                                    body: body.prefix(body.count / 2))), .close]
            }
            let asked = head.headers.first(name: "range").flatMap { Int($0.dropFirst("bytes=".count).prefix { $0 != "-" }) } ?? 0
            let rest = body.suffix(from: min(asked, body.count))
            return [.bytes(HostileOrigin.answer(
                status: "206 Partial Content",
                headers: ["Content-Type": "video/mp4", "Content-Length": "\(rest.count)", "Content-Range": contentRange(asked), "ETag": "\"e1\""],
                body: Data(rest)))]
        }
    }

    @Test func aResumeAnsweredWithAnImpossibleContentRangeFailsTheAsset() async throws {
        let bench = try await DownloadBench.start()
        let origin = try await HostileOrigin.start()
        let body = TestOrigin.content(200_000, seed: 7)
        let ranges: [@Sendable (Int) -> String] = [
            { "bytes \($0)-199999/-9223372036854775808" },  // the attack found: `total - have` trapped
            { "bytes \($0)-199999/-1" }, { "bytes \($0)-199999/150000" }, { "bytes \($0)-\($0 - 1)/200000" },
            { "bytes \($0)-9223372036854775807/*" }, { "bytes \($0)-199999/2.5e5" }, { "bytes -\($0)-199999/200000" },
            { "bytes \($0)-199998/200000" }, { "bytes \($0)-199999/99999999999999999999" }, { "bytes +\($0)-199999/200000" },
            { "bytes \($0 + 1)-199999/200000" }, { "bytes \($0)-199999" },
        ]
        for (index, range) in ranges.enumerated() {
            origin.route("/r\(index).mp4", Self.resumeAnsweredWith(range, body: body))
            try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "r\(index)", url: origin.url("/r\(index).mp4")))
        }
        for (index, range) in ranges.enumerated() {
            let asset = try await bench.waitForOutcome("r\(index)")
            guard case .failed(let failure) = asset.state else { Issue.record("\(range(1)): \(asset.state)"); continue }
            #expect(failure.kind == .protocolViolation, "\(range(1)): \(failure)")
        }
        // The same answer, well-formed, resumes.
        origin.route("/good.mp4", Self.resumeAnsweredWith({ "bytes \($0)-199999/200000" }, body: body))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "good", url: origin.url("/good.mp4")))
        let good = try await bench.waitForOutcome("good")
        #expect(good.state == .completed)
        #expect(try Data(contentsOf: try #require(good.localURL)) == body)
        #expect(origin.requests("/good.mp4") == 2)
        await origin.stop()
        await bench.stop()
    }

    @Test func aLengthBeyondAnyStorageFailsItsAssetAndTheQueueMovesOn() async throws {
        let bench = try await DownloadBench.start()
        let origin = try await HostileOrigin.start()
        origin.route("/huge.mp4") { _, _ in
            [.bytes(HostileOrigin.answer(headers: ["Content-Type": "video/mp4", "Content-Length": "4611686018427387904"], body: Data(count: 1000))),
             .pause(.seconds(5)), .close]
        }
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "huge", url: origin.url("/huge.mp4")))
        let huge = try await bench.waitForOutcome("huge", timeout: .seconds(20))
        #expect(huge.state == .failed(try #require(huge.lastFailure)))
        #expect(huge.lastFailure?.kind == .origin)
        #expect(huge.errorCount == 1)
        // Queued behind it, it downloads: the queue did not block on storage.
        try await Self.normalDownloadWorks(bench, origin)
        await origin.stop()
        await bench.stop()
    }

    @Test func aTricklingOriginFailsTheTryInsteadOfHangingTheQueue() async throws {
        let bench = try await DownloadBench.start(options: { $0.minimumTransferRate = TransferRate(bytesPerSecond: 1_000, over: .seconds(2)) })
        let origin = try await HostileOrigin.start()
        // One byte every half second of a long playlist: in time for every read timeout.
        let trickle: HostileOrigin.Script = { _, _ in
            [.bytes(HostileOrigin.answer(headers: ["Content-Type": Self.playlistType, "Content-Length": "100000"], body: Data("#EXTM3U\n".utf8)))]
                + Array(repeating: [HostileOrigin.Part.pause(.milliseconds(500)), .bytes(Data("#".utf8))], count: 400).flatMap { $0 }
        }
        origin.route("/slow.m3u8", trickle)
        let started = ContinuousClock.now
        let queued = try await withThrowingTaskGroup(of: DownloadAsset?.self) { group in
            group.addTask { try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "slow", url: origin.url("/slow.m3u8"), kind: .hls)) }
            group.addTask { try await Task.sleep(for: .seconds(30)); return nil }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
        // Queued (a slow origin is a passing fault) in about the rate's window, not after 200 s.
        #expect(queued?.assetId == "slow")
        #expect(ContinuousClock.now - started < .seconds(15))
        // The engine's own tries fail the same way and count.
        try await bench.wait("an error pass") { try await bench.engine.downloads.asset("slow").map { $0.errorCount >= 1 } ?? false }
        #expect(try await bench.engine.downloads.asset("slow")?.lastFailure?.kind == .network)
        try await bench.engine.downloads.remove(assetId: "slow")
        try await Self.normalDownloadWorks(bench, origin)
        await origin.stop()
        await bench.stop()
    }

    @Test func playlistsThatFailForAPassingReasonAreQueuedAndFetchedByTheEngine() async throws {
        let bench = try await DownloadBench.start()
        let origin = try await HostileOrigin.start()
        let segment = TestOrigin.content(30_000, seed: 8)
        origin.serve("/s.ts", segment, contentType: "video/mp2t")
        let playlist = Data(Self.media("#EXTINF:6,\ns.ts").utf8)
        origin.route("/flaky.m3u8") { _, attempt in
            attempt == 1
                ? [.bytes(HostileOrigin.answer(status: "503 Service Unavailable", headers: ["Content-Length": "0"]))]
                : [.bytes(HostileOrigin.answer(headers: ["Content-Type": Self.playlistType, "Content-Length": "\(playlist.count)"], body: playlist))]
        }
        let queued = try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "flaky", url: origin.url("/flaky.m3u8"), kind: .hls))
        #expect(queued.state != .completed)
        let asset = try await bench.waitForOutcome("flaky")
        #expect(asset.state == .completed)
        #expect(origin.requests("/flaky.m3u8") == 2)
        // Offline: nothing listens on the origin's port. Queued, and tried by the engine.
        let closed = try await HostileOrigin.start()
        let offline = closed.url("/gone.m3u8")
        await closed.stop()
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "offline", url: offline, kind: .hls))
        try await bench.wait("a failed try") { try await bench.engine.downloads.asset("offline").map { $0.errorCount >= 1 } ?? false }
        #expect(try await bench.engine.downloads.asset("offline")?.lastFailure?.kind == .network)
        // A permanent problem is still refused at once.
        origin.serve("/page.m3u8", Data("<html>captive portal</html>".utf8), contentType: "text/html")
        let refused = try await Self.refusal(bench.engine, DownloadRequest(assetId: "page", url: origin.url("/page.m3u8"), kind: .hls))
        #expect(refused?.kind == .playlist)
        await origin.stop()
        await bench.stop()
    }

    @Test func anAssetsPlaylistsHaveOneBudgetInAll() async throws {
        let bench = try await DownloadBench.start(options: { $0.playlistLimits = PlaylistLimits(bytes: 1_000_000, segments: 1_000) })
        let origin = try await HostileOrigin.start()
        // Eight renditions of 200 KB each: each under the limit, together over it.
        let padding = String(repeating: "#EXT-X-COMMENT-PADDING\n", count: 200_000 / 23)
        // Valid playlists (each is parsed as it arrives): the padding is unknown tags, which parsers skip.
        let rendition = Data(Self.media("#EXTINF:6,\na.aac", header: "#EXT-X-TARGETDURATION:6\n" + padding).utf8)
        var master = "#EXTM3U\n"
        for index in 0..<8 {
            origin.serve("/a\(index).m3u8", rendition, contentType: Self.playlistType)
            master += "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"a\(index)\",LANGUAGE=\"x\(index)\",URI=\"a\(index).m3u8\"\n"
        }
        origin.serve("/v.m3u8", Data(Self.media("#EXTINF:6,\nv.ts").utf8), contentType: Self.playlistType)
        origin.serve("/master.m3u8", Data((master + "#EXT-X-STREAM-INF:BANDWIDTH=1000,AUDIO=\"a\"\nv.m3u8\n").utf8), contentType: Self.playlistType)
        let failure = try await Self.refusal(bench.engine, DownloadRequest(assetId: "wide", url: origin.url("/master.m3u8"), kind: .hls))
        #expect(failure?.kind == .playlist)
        #expect(failure?.message.contains("1000000 bytes in all") == true, "\(String(describing: failure))")
        // Fetching stopped at the budget, and what was fetched is gone.
        #expect((0..<8).map { origin.requests("/a\($0).m3u8") }.reduce(0, +) <= 5)
        #expect(Self.bytes(under: bench.dataDirectory.appendingPathComponent("content")) == 0)

        // Segments: 1,001 over the streams chosen.
        let many = (0..<1_001).map { "#EXTINF:6,\ns\($0).ts" }.joined(separator: "\n")
        origin.serve("/many.m3u8", Data(Self.media(many).utf8), contentType: Self.playlistType)
        let tooMany = try await Self.refusal(bench.engine, DownloadRequest(assetId: "many", url: origin.url("/many.m3u8"), kind: .hls))
        #expect(tooMany?.kind == .playlist)
        #expect(tooMany?.message.contains("more than 1000 segments") == true, "\(String(describing: tooMany))")
        try await Self.normalDownloadWorks(bench, origin)
        await origin.stop()
        await bench.stop()
    }

    @Test func playlistsCountAgainstTheStorageRules() async throws {
        let bench = try await DownloadBench.start(options: { $0.maxStorage = 100_000 })
        let origin = try await HostileOrigin.start()
        // 60 KB held by a completed asset leaves 40 KB.
        origin.serve("/held.mp4", TestOrigin.content(60_000, seed: 3))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "held", url: origin.url("/held.mp4")))
        #expect(try await bench.waitForOutcome("held").state == .completed)
        func playlist(_ bytes: Int) -> Data {
            Data((String(repeating: "#EXT-X-COMMENT-PADDING\n", count: bytes / 23) + Self.media("#EXTINF:6,\na.ts")).utf8)
        }
        // More than maxStorage could ever hold: refused at once, and it holds up nothing.
        origin.serve("/huge.m3u8", playlist(300_000), contentType: Self.playlistType)
        let refused = try await Self.refusal(bench.engine, DownloadRequest(assetId: "huge", url: origin.url("/huge.m3u8"), kind: .hls))
        #expect(refused?.kind == .origin, "\(String(describing: refused))")
        // More than the room left but within maxStorage: a passing reason. Queued, waiting for
        // room, with nothing kept.
        origin.serve("/big.m3u8", playlist(80_000), contentType: Self.playlistType)
        let queued = try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "big", url: origin.url("/big.m3u8"), kind: .hls))
        #expect(queued.assetId == "big")
        try await bench.wait("the storage block") { try await bench.engine.downloads.asset("big")?.state == .blocked(.storage) }
        #expect(Self.bytes(under: bench.dataDirectory.appendingPathComponent("content")) <= 100_000)
        await origin.stop()
        await bench.stop()
    }

    @Test func anAssetThatCouldNeverFitFailsInsteadOfWaitingForRoom() async throws {
        let bench = try await DownloadBench.start(options: { $0.maxStorage = 100_000; $0.parallelFiles = 1 })
        let origin = try await HostileOrigin.start()
        // Three segments of 40 KB: each fits, together they pass maxStorage.
        origin.serve("/seg.ts", TestOrigin.content(40_000, seed: 4), contentType: "video/mp2t")
        origin.serve("/three.m3u8", Data(Self.media("#EXTINF:6,\nseg.ts?1\n#EXTINF:6,\nseg.ts?2\n#EXTINF:6,\nseg.ts?3").utf8), contentType: Self.playlistType)
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "three", url: origin.url("/three.m3u8"), kind: .hls))
        let three = try await bench.waitForOutcome("three", timeout: .seconds(20))
        #expect(three.lastFailure?.kind == .origin, "\(String(describing: three.lastFailure))")
        // No declared length, and more than maxStorage before the connection closes.
        origin.route("/endless.mp4") { _, _ in
            [.bytes(HostileOrigin.answer(headers: ["Content-Type": "video/mp4", "Connection": "close"], body: Data(count: 150_000))), .close]
        }
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "endless", url: origin.url("/endless.mp4")))
        let endless = try await bench.waitForOutcome("endless", timeout: .seconds(20))
        #expect(endless.lastFailure?.kind == .origin, "\(String(describing: endless.lastFailure))")
        try await Self.normalDownloadWorks(bench, origin, bytes: 50_000)
        await origin.stop()
        await bench.stop()
    }

    /// The size estimate's `HEAD` answers are the origin's too: a length no storage could hold
    /// fails the asset before one byte of it is asked for; a length that is not digits is never
    /// taken (the `HEAD` counts as unanswered, and the `GET` of the first byte, answered in full
    /// here, gives the size), and the download goes on.
    @Test func aHeadAnswerWithAnImpossibleLengthFailsTheAssetBeforeItsDownload() async throws {
        let bench = try await DownloadBench.start()
        let origin = try await HostileOrigin.start()
        origin.route("/vast.mp4", answeringHead: true) { head, _ in
            [.bytes(HostileOrigin.answer(headers: ["Content-Type": "video/mp4", "Content-Length": "4611686018427387904"]))]
        }
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "vast", url: origin.url("/vast.mp4")))
        let vast = try await bench.waitForOutcome("vast", timeout: .seconds(20))
        #expect(vast.lastFailure?.kind == .origin && vast.errorCount == 1, "\(String(describing: vast.lastFailure))")
        #expect(origin.heads("/vast.mp4").allSatisfy { $0.method == .HEAD }, "a GET for the asset")

        let body = TestOrigin.content(20_000, seed: 3)
        for (index, length) in ["-1", "2.5e5", "99999999999999999999", "+20000", "0x4e20"].enumerated() {
            origin.route("/odd\(index).mp4", answeringHead: true) { head, _ in
                head.method == .HEAD
                    ? [.bytes(HostileOrigin.answer(headers: ["Content-Type": "video/mp4", "Content-Length": length]))]
                    : [.bytes(HostileOrigin.answer(headers: ["Content-Type": "video/mp4", "Content-Length": "\(body.count)"], body: body))]
            }
            let queued = try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "odd\(index)", url: origin.url("/odd\(index).mp4")))
            #expect(queued.estimatedBytes == Int64(body.count), "\(length)")
            #expect(try await bench.waitForOutcome("odd\(index)", timeout: .seconds(20)).state == .completed, "\(length)")
        }
        await origin.stop()
        await bench.stop()
    }

    static func bytes(under directory: URL) -> Int {
        guard let walk = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.fileSizeKey]) else { return 0 }
        var total = 0
        for case let file as URL in walk { total += (try? file.resourceValues(forKeys: [.fileSizeKey]))?.fileSize ?? 0 }
        return total
    }
}
