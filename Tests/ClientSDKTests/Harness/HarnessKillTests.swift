@testable import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// Downloads as a user lives them on a phone that kills apps: the built `backplane-harness`
/// killed with SIGKILL at 20 random moments of a long download from a throttled origin,
/// started again each time. The asset ends byte-exact, and the origin served it little more
/// than once. Then a power loss: the files the system had not written yet are cut short, and
/// the next start's settling repairs the download.
@Suite(.serialized, .enabled(if: FaultTests.requested, Comment(rawValue: FaultTests.skipReason))) struct HarnessKillTests {
    static let kills = 20
    /// Each answer's body is sent at this rate: slow enough for kills to land mid-file, fast
    /// enough for the test to end in about a minute.
    static let originRate = 4 << 20
    /// Bytes the origin may serve, as a multiple of the asset's.
    static let mostServed = 1.2

    @Test func aLongFlatDownloadKilledTwentyTimesEndsByteExact() async throws {
        try await Self.withServedDevice("kill-flat") { backplane, origin, device in
            let movie = TestOrigin.content(64 << 20, seed: 7)
            origin.serve("/movies/long.mp4", movie)
            origin.throttle(bytesPerSecond: Self.originRate)
            let arguments = ["download", "--asset-id", "movie", "--url", origin.url("/movies/long.mp4").absoluteString, "--mime", "video/mp4", "--wait"]
            let path = try await Self.killAndFinish(
                backplane, arguments: arguments, device: device, size: movie.count, served: { origin.bytesServed(under: "/movies/") })
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == movie, "the file differs from the origin's")
        }
    }

    @Test func aLongHLSDownloadKilledTwentyTimesEndsByteExact() async throws {
        try await Self.withServedDevice("kill-hls") { backplane, origin, device in
            let segments = 120
            let hls = TestHLSAsset(serving: origin, segments: segments, segmentBytes: 512 << 10)
            origin.throttle(bytesPerSecond: Self.originRate)
            let media = ["/hls/low/segments.mp4", "/hls/low/init.mp4", "/hls/keys/k1.key"] + (0..<segments).map { "/hls/audio/en/\($0).aac" }
            let size = media.reduce(0) { $0 + (hls.files[$1]?.count ?? 0) }
            let served = { origin.bytesServed(under: "/hls/low/") + origin.bytesServed(under: "/hls/audio/en/") + origin.bytesServed(under: "/hls/keys/") }
            let path = try await Self.killAndFinish(backplane, arguments: Self.hlsArguments(origin), device: device, size: size, served: served)
            try Self.expectWhole(hls, index: URL(fileURLWithPath: path), segments: segments)
        }
    }

    /// The default writes without flushes. Killed mid-download (bytes written, none flushed),
    /// then the system stops before writing them: every file of the asset is cut short or
    /// emptied, as the pages it had not written would be. At the next start, in a new run of
    /// the system, the engine's settling starts the download over, and it ends byte-exact.
    @Test func aDownloadCutShortByAPowerLossIsRepairedAtTheNextStart() async throws {
        try await Self.withServedDevice("power-loss") { backplane, origin, device in
            let segments = 60
            let hls = TestHLSAsset(serving: origin, segments: segments, segmentBytes: 256 << 10)
            origin.throttle(bytesPerSecond: 2 << 20)
            let harness = try backplane.harness(user: "power-loss")
            let arguments = Self.hlsArguments(origin) + ["--data-dir", device.path]
            let first = try ChildProcess(harness.binary, arguments, environment: harness.environment)
            defer { first.terminate() }
            let deadline = ContinuousClock.now + .seconds(60)
            while origin.bytesServed("/hls/low/segments.mp4") < segments / 2 * (256 << 10), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            first.signal(SIGKILL)
            _ = try await first.waitForExit(timeout: .seconds(10))

            // The asset is listed as written without flushes in this run of the system.
            let database = try SDKDatabase(directory: device)
            let listed = try #require(try database.load(UnflushedDownloads.self, .unflushedDownloads))
            #expect(listed.assetIdsByBoot.values.contains { $0.contains("show") }, "the download was not listed as unflushed: \(listed)")
            // The power loss: each file written keeps a random part of its bytes (its pages not
            // yet written are gone), and the next start is in a new run of the system.
            let directory = device.appendingPathComponent("content").appendingPathComponent(ContentStore.directoryName(for: "show"))
            var generator = SeededGenerator(seed: 38_039)
            var cut = 0
            for file in try Self.mediaFiles(in: directory) {
                let size = try #require(LocalFiles.size(of: file))
                let handle = try FileHandle(forWritingTo: file)
                try handle.truncate(atOffset: UInt64(Int64.random(in: 0...max(size - 1, 0), using: &generator)))
                try handle.close()
                cut += 1
            }
            #expect(cut > 4, "the kill left only \(cut) files to cut")
            try database.save(UnflushedDownloads(assetIdsByBoot: ["a run of the system before the power loss": ["show"]]), .unflushedDownloads)

            let second = try await ChildProcess.run(harness.binary, arguments, environment: harness.environment, timeout: .seconds(120))
            #expect(second.status == 0, "\(second.output)")
            let result = try HarnessEndToEndTests.Harness.result(second.output)
            #expect(result["state"] == .string("completed"), "\(second.output)")
            guard case .string(let path) = result["path"] else { return }
            try Self.expectWhole(hls, index: URL(fileURLWithPath: path), segments: segments)
        }
    }

    // MARK: the steps

    /// Runs the harness with `arguments` `kills` times, each killed with SIGKILL once the origin
    /// has served a random share of the asset (sorted, so the kills spread over the download)
    /// and a random few milliseconds more, then once to the end. The path it reports.
    static func killAndFinish(
        _ backplane: HarnessEndToEndTests.ServedBackplane, arguments: [String], device: URL, size: Int, served: () -> Int
    ) async throws -> String {
        let harness = try backplane.harness(user: device.lastPathComponent)
        let arguments = arguments + ["--data-dir", device.path]
        // A failing run's moments come back with BACKPLANE_KILL_SEED set to its seed.
        let seed = ProcessInfo.processInfo.environment["BACKPLANE_KILL_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64.max)
        var generator = SeededGenerator(seed: seed)
        let targets = (0..<kills).map { _ in Int.random(in: (size / 50)...(size * 19 / 20), using: &generator) }.sorted()
        var landed = 0
        for target in targets {
            let process = try ChildProcess(harness.binary, arguments, environment: harness.environment)
            defer { process.terminate() }
            let deadline = ContinuousClock.now + .seconds(60)
            while served() < target, process.isRunning, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(2))
            }
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...30, using: &generator)))
            if process.isRunning { landed += 1 }
            process.signal(SIGKILL)
            _ = try await process.waitForExit(timeout: .seconds(10))
        }
        #expect(landed == kills, "\(kills - landed) of the kills found the harness ended (seed \(seed))")
        #expect(served() < size, "the download ended before the last kill (seed \(seed))")

        let last = try await ChildProcess.run(harness.binary, arguments, environment: harness.environment, timeout: .seconds(180))
        #expect(last.status == 0, "\(last.output)")
        let result = try HarnessEndToEndTests.Harness.result(last.output)
        #expect(result["state"] == .string("completed"), "\(last.output)")
        let ratio = Double(served()) / Double(size)
        #expect(ratio <= mostServed, "the origin served \(served()) bytes for \(size) (\(ratio)×) over \(kills) kills (seed \(seed))")
        FileHandle.standardError.write(Data("HarnessKillTests: \(landed) kills, the origin served \(String(format: "%.3f", ratio))× the asset's \(size) bytes (seed \(seed))\n".utf8))
        guard case .string(let path) = result["path"] else { throw Missing.path(last.output) }
        return path
    }

    enum Missing: Error { case path(String) }

    static func hlsArguments(_ origin: TestOrigin) -> [String] {
        [
            "download", "--asset-id", "show", "--url", origin.url("/hls/master.m3u8").absoluteString, "--hls",
            "--max-bitrate", "0", "--audio", "en", "--subtitles", "", "--mime", "video/mp4", "--mime", "audio/aac", "--wait",
        ]
    }

    /// Every video and audio file of the local playlists equal to the origin's.
    static func expectWhole(_ hls: TestHLSAsset, index: URL, segments: Int) throws {
        let tree = try LocalPlaylistTree(index: index)
        let base = index.deletingLastPathComponent()
        let video = try #require(tree.references["video.m3u8"]).filter { !$0.hasSuffix(".key") && !$0.contains("init-") }
        #expect(video.count == segments)
        for (number, file) in video.enumerated() {
            #expect(try Data(contentsOf: base.appendingPathComponent(file)) == hls.videoSegment("low", number), "video segment \(number)")
        }
        let audio = try #require(tree.references.first { $0.key.hasPrefix("audio") }?.value).filter { !$0.hasSuffix(".key") }
        #expect(audio.count == segments)
        for (number, file) in audio.enumerated() {
            #expect(try Data(contentsOf: base.appendingPathComponent(file)) == hls.files["/hls/audio/en/\(number).aac"], "audio segment \(number)")
        }
    }

    /// The asset's files that hold media, partial ones included.
    static func mediaFiles(in directory: URL) throws -> [URL] {
        let names = FileManager.default.subpaths(atPath: directory.path) ?? []
        return names.filter { !$0.hasPrefix("original") && !$0.hasSuffix(".m3u8") && !$0.hasSuffix(".partial-info") }
            .map { directory.appendingPathComponent($0) }
            .filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }
    }

    /// A backplane, a throttle-able origin and a device directory for one test.
    static func withServedDevice(
        _ name: String, _ body: (HarnessEndToEndTests.ServedBackplane, TestOrigin, URL) async throws -> Void
    ) async throws {
        let root = try createdTemporaryDirectory("backplane-\(name)")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await HarnessEndToEndTests.ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        let origin = try await TestOrigin.start()
        try await body(backplane, origin, root.appendingPathComponent("phone"))
        await origin.stop()
    }
}

/// SplitMix64: random moments a failing run can be repeated with (its seed is in the message).
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
