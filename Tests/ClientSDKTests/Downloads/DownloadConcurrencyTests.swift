@testable import ClientSDK
import Foundation
import Testing
import TestSupport

/// How many files the engine fetches at once: it grows on a link that rewards it, backs off on
/// an overloaded origin, stays under the per-host caps, and shares the app's bandwidth cap.
/// Asserted on the requests the origin sees, never on a time.
@Suite struct DownloadConcurrencyTests {
    /// An HLS title of `count` segments of `bytes` bytes, each named `<prefix>/<n>.ts`.
    static func serveTitle(on origin: TestOrigin, prefix: String = "/far", count: Int, bytes: Int) {
        var playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:0\n"
        for index in 0..<count {
            origin.serve("\(prefix)/\(index).ts", TestOrigin.content(bytes, seed: UInt8(truncatingIfNeeded: index)), contentType: "video/mp2t")
            playlist += "#EXTINF:2.0,\n\(index).ts\n"
        }
        origin.serve("\(prefix)/media.m3u8", Data((playlist + "#EXT-X-ENDLIST\n").utf8), contentType: "application/vnd.apple.mpegurl")
    }

    @Test func concurrencyGrowsOnASlowAnsweringOriginAndHalvesOn503s() async throws {
        let bench = try await DownloadBench.start(options: { $0.waitBeforeRetry = { _ in } })
        let count = 240
        Self.serveTitle(on: bench.origin, count: count, bytes: 4_000)
        // Each answer waits as a far origin's would: more requests in flight, more throughput.
        // (The wait is long beside a busy machine's delays, so that it is what the engine measures.)
        for index in 0..<count { bench.origin.inject(.delay(.milliseconds(100)), at: "/far/\(index).ts") }
        // Then the origin is overloaded: a run of segments answers 503 once.
        let overloaded = 120..<150
        for index in overloaded { bench.origin.inject(.failFirst(1, status: 503), at: "/far/\(index).ts") }
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "far", url: bench.origin.url("/far/media.m3u8"), kind: .hls))
        #expect(try await bench.waitForOutcome("far", timeout: .seconds(120)).state == .completed)

        let inFlight = bench.origin.inFlightAtArrivals(under: "/far/")
        let order = bench.origin.arrivalOrder(under: "/far/").filter { $0.hasSuffix(".ts") }
        #expect(order.count == count + overloaded.count, "every segment once, the overloaded ones twice")
        let segmentsInFlight = zip(bench.origin.arrivalOrder(under: "/far/"), inFlight).filter { $0.0.hasSuffix(".ts") }.map(\.1)
        // It starts at parallelFiles (4)…
        #expect(segmentsInFlight.prefix(4).allSatisfy { $0 <= 4 }, "\(segmentsInFlight.prefix(8))")
        // …grows (how far depends on what the machine lets the origin's waits show: on an idle
        // one to the cap, 16; the rules that decide are `AdaptiveConcurrencyTests`'), and never
        // passes the per-host cap of HTTP/1.1…
        let beforeOverload = Array(segmentsInFlight[..<order.firstIndex(of: "/far/\(overloaded.lowerBound).ts")!])
        let most = try #require(beforeOverload.max())
        #expect(most >= 8, "\(beforeOverload)")
        #expect(segmentsInFlight.allSatisfy { $0 <= 16 })
        // …and once the 503s come back, it halves: past the retries of the requests that were
        // out already (at most `most` arrivals), requests go out at half of what they did.
        let firstRetry = order.indices.first { index in order[..<index].contains(order[index]) }!
        let afterBackOff = Array(segmentsInFlight[firstRetry...].dropFirst(most).prefix(20))
        #expect(afterBackOff.count == 20 && afterBackOff.allSatisfy { $0 <= most / 2 }, "\(most) before, then \(afterBackOff)")
        await bench.stop()
    }

    @Test func aFixedConcurrencyHoldsParallelFiles() async throws {
        let bench = try await DownloadBench.start(options: { $0.adaptsConcurrency = false; $0.parallelFiles = 3 })
        Self.serveTitle(on: bench.origin, count: 60, bytes: 4_000)
        for index in 0..<60 { bench.origin.inject(.delay(.milliseconds(20)), at: "/far/\(index).ts") }
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "far", url: bench.origin.url("/far/media.m3u8"), kind: .hls))
        #expect(try await bench.waitForOutcome("far", timeout: .seconds(120)).state == .completed)
        let inFlight = bench.origin.inFlightAtArrivals(under: "/far/")
        #expect(inFlight.max() == 3, "\(inFlight)")
        await bench.stop()
    }

    @Test func theBandwidthCapPacesEveryFileInFlightAndCanChange() async throws {
        // The cap keeps its schedule on a clock the test moves: a wait moves it, nothing else.
        let clock = LockedBox(ContinuousClock.now)
        let started = clock.withLock { $0 }
        let waits = LockedBox(0)
        let bench = try await DownloadBench.start(options: {
            $0.maxBytesPerSecond = 100_000
            $0.bandwidthClock = (
                now: { clock.withLock { $0 } },
                sleep: { until in
                    waits.withLock { $0 += 1 }
                    clock.withLock { $0 = max($0, until) }
                })
        })
        Self.serveTitle(on: bench.origin, count: 40, bytes: 25_000)
        for index in 0..<40 { bench.origin.inject(.delay(.milliseconds(20)), at: "/far/\(index).ts") }
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "far", url: bench.origin.url("/far/media.m3u8"), kind: .hls))
        #expect(try await bench.waitForOutcome("far", timeout: .seconds(120)).state == .completed)
        // 1 MB at 100 kB/s: the schedule took 10 s, less the burst it allows.
        let spent = clock.withLock { $0 } - started
        #expect(spent >= .seconds(9.8) && spent <= .seconds(10.5), "the schedule took \(spent)")
        // No more files at once than the cap feeds (100 kB/s × 8 s ÷ 64 KiB: 12).
        #expect(bench.origin.inFlightAtArrivals(under: "/far/").allSatisfy { $0 <= 12 })

        // Lifted: the next title waits for nothing.
        try await bench.engine.downloads.setBandwidthLimit(bytesPerSecond: nil)
        let before = waits.withLock { $0 }
        Self.serveTitle(on: bench.origin, prefix: "/free", count: 40, bytes: 25_000)
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "free", url: bench.origin.url("/free/media.m3u8"), kind: .hls))
        #expect(try await bench.waitForOutcome("free", timeout: .seconds(120)).state == .completed)
        #expect(waits.withLock { $0 } == before)
        await bench.stop()
    }

    @Test func aCapLiftedReachesTheFetchesAlreadyWaiting() async throws {
        let clock = LockedBox(ContinuousClock.now)
        let sleeps = LockedBox(0)
        let holder = LockedBox<BandwidthLimit?>(nil)
        let limit = BandwidthLimit(bytesPerSecond: 16 << 10, now: { clock.withLock { $0 } }, sleep: { until in
            let count = sleeps.withLock { $0 += 1; return $0 }
            clock.withLock { $0 = max($0, until) }
            // The app lifts the cap while this fetch waits out its turn (64 s of it).
            if count == 3 { holder.withLock { $0 }?.bytesPerSecond = nil }
        })
        holder.withLock { $0 = limit }
        _ = try await limit.take(1 << 20)
        #expect(sleeps.withLock { $0 } == 3, "it slept on after the cap was lifted")
        // A cap set later starts its schedule afresh, not after the old one's bookings.
        limit.bytesPerSecond = 1 << 20
        let waited = try await limit.take(64 << 10)
        #expect(waited < .seconds(0.1))
    }

    @Test func anHTTP2OriginCarriesTheWholeDownloadOnOneConnection() async throws {
        guard let certificates = try await TestCertificates.madeForTest("sdk-h2-origin", what: "the HTTP/2 origin test") else { return }
        // An origin that speaks h2 only, answering each request after a wait: many at once on
        // one connection is the only way through it quickly.
        let files = LockedBox<[String: Data]>([:])
        let inFlight = LockedBox((now: 0, most: 0))
        // The segments the download asks for before the first is answered: its first number.
        // The first ones' answers wait half a second, so that none frees a slot meanwhile. (The
        // size estimate's requests, a HEAD or a first byte, are not the download's.)
        let firstWave = LockedBox((asked: 0, opened: ContinuousClock.Instant?.none))
        let server = try await LocalHTTP2Server.start(certificate: certificates.certificate, privateKey: certificates.privateKey) { request in
            inFlight.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
            if request.path.hasSuffix(".ts"), request.method == "GET", request.headers["range"] == nil {
                let opened = firstWave.withLock { wave in
                    if wave.opened == nil { wave.opened = .now }
                    if ContinuousClock.now < wave.opened! + .milliseconds(500) { wave.asked += 1 }
                    return wave.opened!
                }
                let held = opened + .milliseconds(500) - .now
                if held > .zero { try? await Task.sleep(for: held) }
            }
            try? await Task.sleep(for: .milliseconds(20))
            inFlight.withLock { $0.now -= 1 }
            guard let body = files.withLock({ $0[request.path] }) else { return .init(status: 404) }
            return .init(status: 200, headers: [("content-type", request.path.hasSuffix(".ts") ? "video/mp2t" : "application/vnd.apple.mpegurl")], body: body)
        }
        let count = 150
        var playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n"
        var expected: [Data] = []
        for index in 0..<count {
            let bytes = TestOrigin.content(3_000, seed: UInt8(truncatingIfNeeded: index))
            files.withLock { $0["/h2/\(index).ts"] = bytes }
            expected.append(bytes)
            playlist += "#EXTINF:2.0,\n\(index).ts\n"
        }
        files.withLock { $0["/h2/media.m3u8"] = Data((playlist + "#EXT-X-ENDLIST\n").utf8) }
        let bench = try await DownloadBench.start(options: { $0.originCertificateAuthorities = certificates.authority })
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "h2", url: URL(string: "https://127.0.0.1:\(server.port)/h2/media.m3u8")!, kind: .hls))
        let asset = try await bench.waitForOutcome("h2", timeout: .seconds(120))
        #expect(asset.state == .completed)
        #expect(server.connectionsAccepted == 1, "the download took \(server.connectionsAccepted) connections")
        // Past what HTTP/1.1 would have allowed on one connection (one), and the files are whole.
        #expect(inFlight.withLock { $0.most } > 4, "at most \(inFlight.withLock { $0.most }) requests at once")
        // Its playlist came over HTTP/2 too: the download started one doubling above the
        // default 4 files.
        #expect(firstWave.withLock { $0.asked } == 8, "\(firstWave.withLock { $0.asked }) segments asked for at first")
        let local = try #require(asset.localURL).deletingLastPathComponent()
        let stored = try FileManager.default.subpathsOfDirectory(atPath: local.path).filter { $0.hasSuffix(".ts") && !$0.hasPrefix("original") }
        #expect(stored.count == count)
        var found = 0
        for path in stored {
            let data = try Data(contentsOf: local.appendingPathComponent(path))
            if expected.contains(data) { found += 1 }
        }
        #expect(found == count)
        await bench.stop()
        await server.stop()
    }
}

/// The pace's rules on a clock the test moves: growth while it pays, a step back when it does
/// not, one halving per window of requests on an overloaded origin.
@Suite struct AdaptiveConcurrencyTests {
    final class TestClock: Sendable {
        let instant = LockedBox(ContinuousClock.now)
        func advance(_ duration: Duration) { instant.withLock { $0 += duration } }
        var now: ContinuousClock.Instant { instant.withLock { $0 } }
    }

    /// Ends one round of files of 100 KB at `rate` bytes per second in all, each asked for
    /// after the last change.
    func round(_ pace: AdaptiveConcurrency, _ clock: TestClock, rate: Double) {
        let rounds = pace.rounds
        while pace.rounds == rounds {
            let asked = clock.now
            clock.advance(.seconds(100_000 / rate))
            pace.completed(bytes: 100_000, startedAt: asked, host: "h", multiplexed: false)
        }
    }

    @Test func itDoublesWhileThroughputGrowsThenStepsBackWhenItStops() {
        let clock = TestClock()
        let pace = AdaptiveConcurrency(.init(initial: 4, connectionsPerHost: 16, streamsPerHost: 128, adapts: true), now: { clock.now })
        round(pace, clock, rate: 4e6)  // 4 at 4 MB/s
        #expect(pace.limit == 8)
        round(pace, clock, rate: 8e6)  // twice the rate: it paid
        #expect(pace.limit == 16)
        round(pace, clock, rate: 8.2e6)  // the link is full: back to 8
        #expect(pace.limit == 8)
        #expect(pace.history == [4, 8, 16, 8])
        // Held a while at the number that paid, then it probes by a quarter.
        for _ in 0..<AdaptiveConcurrency.holdRounds { round(pace, clock, rate: 8e6) }
        #expect(pace.limit == 8)
        round(pace, clock, rate: 8e6)
        #expect(pace.limit == 10)
    }

    @Test func filesAskedForBeforeAChangeDoNotCountForTheNewNumber() {
        let clock = TestClock()
        let pace = AdaptiveConcurrency(.init(initial: 4, connectionsPerHost: 16, streamsPerHost: 128, adapts: true), now: { clock.now })
        let early = clock.now
        round(pace, clock, rate: 4e6)
        #expect(pace.limit == 8)
        // Files asked for at 4 end slowly after the change: they say nothing of 8.
        let rounds = pace.rounds
        for _ in 0..<50 {
            clock.advance(.seconds(1))
            pace.completed(bytes: 100_000, startedAt: early, host: "h", multiplexed: false)
        }
        #expect(pace.rounds == rounds)
        #expect(pace.limit == 8)
    }

    @Test func anOverloadedOriginHalvesItOncePerWindow() {
        let clock = TestClock()
        let pace = AdaptiveConcurrency(.init(initial: 16, connectionsPerHost: 16, streamsPerHost: 128, adapts: true), now: { clock.now })
        let sentBefore = clock.now
        clock.advance(.milliseconds(10))
        pace.failed(startedAt: sentBefore, overloaded: true)
        #expect(pace.limit == 8)
        // The other requests of the same window fail too: they count once.
        for _ in 0..<10 { pace.failed(startedAt: sentBefore, overloaded: true) }
        #expect(pace.limit == 8)
        // A request sent after the back-off that fails again halves it again; a dropped one takes a quarter.
        clock.advance(.milliseconds(10))
        pace.failed(startedAt: clock.now, overloaded: true)
        #expect(pace.limit == 4)
        clock.advance(.milliseconds(10))
        pace.failed(startedAt: clock.now, overloaded: false)
        #expect(pace.limit == 3)
        #expect(pace.history == [16, 8, 4, 3])
    }

    @Test func anHTTP2HostMayCarryMoreThanTheConnectionCap() {
        let clock = TestClock()
        let pace = AdaptiveConcurrency(.init(initial: 4, connectionsPerHost: 16, streamsPerHost: 128, adapts: true), now: { clock.now })
        #expect(!pace.admits(host: "h", toHost: 16, total: 0))
        var rate = 4e6
        while pace.limit < 128, pace.rounds < 20 {
            let rounds = pace.rounds
            while pace.rounds == rounds {
                let asked = clock.now
                clock.advance(.seconds(100_000 / rate))
                pace.completed(bytes: 100_000, startedAt: asked, host: "h", multiplexed: true)
            }
            rate *= 2
        }
        #expect(pace.history == [4, 8, 16, 32, 64, 128])
        #expect(pace.admits(host: "h", toHost: 100, total: 100))
        #expect(!pace.admits(host: "other", toHost: 16, total: 100), "a host not known to speak HTTP/2 keeps the connection cap")
    }

    @Test func anOriginKnownToMultiplexStartsOneDoublingHigher() {
        let clock = TestClock()
        let settings = AdaptiveConcurrency.Settings(initial: 4, connectionsPerHost: 16, streamsPerHost: 128, adapts: true)
        let known = AdaptiveConcurrency(settings, multiplexing: ["https://cdn:443"], firstOrigin: "https://cdn:443", now: { clock.now })
        #expect(known.limit == 8)
        #expect(known.admits(host: "https://cdn:443", toHost: 7, total: 7))
        #expect(known.admits(host: "https://cdn:443", toHost: 20, total: 0), "the stream cap, not the connection cap, from the start")
        let other = AdaptiveConcurrency(settings, multiplexing: ["https://cdn:443"], firstOrigin: "http://origin:80", now: { clock.now })
        #expect(other.limit == 4)
        var fixed = settings
        fixed.adapts = false
        #expect(AdaptiveConcurrency(fixed, multiplexing: ["https://cdn:443"], firstOrigin: "https://cdn:443", now: { clock.now }).limit == 4)
    }

    @Test func theEngineLearnsWhichOriginsAnswerOverHTTP2() throws {
        let origins = OriginProtocols()
        let cdn = try #require(URL(string: "https://cdn.example:8443/a/master.m3u8"))
        origins.answered(cdn, multiplexed: true)
        #expect(origins.multiplexingOrigins == ["https://cdn.example:8443"])
        #expect(OriginProtocols.origin(of: try #require(URL(string: "https://cdn.example:8443/b/1.ts"))) == "https://cdn.example:8443")
        origins.answered(cdn, multiplexed: false)
        #expect(origins.multiplexingOrigins.isEmpty, "an origin that answers over HTTP/1.1 again is no longer counted")
        for index in 0..<(OriginProtocols.capacity + 10) {
            origins.answered(try #require(URL(string: "https://h\(index).example/")), multiplexed: true)
        }
        #expect(origins.multiplexingOrigins.count <= OriginProtocols.capacity)
        #expect(origins.multiplexingOrigins.contains("https://h\(OriginProtocols.capacity + 9).example:"), "the latest is remembered")
    }

    @Test func withoutAdaptingItHolds() {
        let clock = TestClock()
        let pace = AdaptiveConcurrency(.init(initial: 3, connectionsPerHost: 16, streamsPerHost: 128, adapts: false), now: { clock.now })
        pace.failed(startedAt: clock.now, overloaded: true)
        for _ in 0..<50 {
            let asked = clock.now
            clock.advance(.milliseconds(10))
            pace.completed(bytes: 100_000, startedAt: asked, host: "h", multiplexed: false)
        }
        #expect(pace.history == [3])
        #expect(pace.rounds == 0)
    }
}
