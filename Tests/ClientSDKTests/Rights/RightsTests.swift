import Backplane
import ClientSDK
import Foundation
import Testing
import TestSupport

/// Playback rights on the device: windows judged on a trusted clock, play starts, the expiry
/// sweep, and a device clock that the user sets.
@Suite struct RightsTests {
    /// A bench whose backplane and device share simulated time.
    private func bench(
        _ time: SimulatedTime, settings: ApplicationSettingsUpdate, dataDirectory: URL = temporaryDirectory("sdk-rights")
    ) async throws -> DownloadBench {
        let server = try await InProcessBackplane.start(now: { time.now })
        _ = try await server.services.applications.updateSettings(applicationId: server.applicationId, settings)
        return try await DownloadBench.start(dataDirectory: dataDirectory, server: server, rights: { rights in
            rights.deviceClock = time
            // No sweep on a timer within a test: each is asked for (the license tests use the timer).
            rights.sweepInterval = .seconds(3_600)
        })
    }

    /// Sweeps and waits for the asset's expiry event.
    private func sweep(_ bench: DownloadBench, expecting assetId: String, _ reason: ExpiryReason) async throws {
        try await bench.engine.rights.sweepExpired()
        _ = try await bench.events.wait(for: "assetExpired") { event in
            if case .assetExpired(assetId, reason) = event { true } else { false }
        }
    }

    private func download(_ bench: DownloadBench, _ assetId: String, availability: AssetAvailability? = nil) async throws {
        bench.origin.serve("/\(assetId).mp4", TestOrigin.content(5_000))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: assetId, url: bench.origin.url("/\(assetId).mp4"), availability: availability))
        #expect(try await bench.waitForOutcome(assetId).state == .completed)
    }

    private func trustedNow(_ bench: DownloadBench) async throws -> Date {
        try #require(try await bench.engine.rights.trustedTime().date)
    }

    @Test func publishExpiryAndBothExpiriesAfterEndPlaybackAtTheirInstant() async throws {
        let time = SimulatedTime()
        let bench = try await bench(time, settings: ApplicationSettingsUpdate { $0.expiryAfterDownloadSeconds = 3_600; $0.expiryAfterPlaySeconds = 600 })
        let rights = bench.engine.rights
        let t0 = try await trustedNow(bench)
        try await download(bench, "film")
        try await download(bench, "early", availability: AssetAvailability(publishDate: t0.addingTimeInterval(1_800)))
        try await download(bench, "dated", availability: AssetAvailability(expiryDate: t0.addingTimeInterval(1_200)))
        // No time passed on the device: every window starts at t0.
        #expect(try await trustedNow(bench) == t0)
        #expect(try await rights.rights(for: "film") == .valid(until: t0.addingTimeInterval(3_600)))
        #expect(try await rights.rights(for: "early") == .notYetAvailable(from: t0.addingTimeInterval(1_800)))
        #expect(try await rights.rights(for: "dated") == .valid(until: t0.addingTimeInterval(1_200)))
        #expect(try await rights.rights(for: "never-downloaded") == .noRights)
        #expect(try await rights.playable().map(\.assetId) == ["film", "dated"])

        // The first play starts the expiry after play, which ends before the expiry after download.
        time.advance(by: 100)
        #expect(try await rights.recordPlayStart(assetId: "film") == .valid(until: t0.addingTimeInterval(700)))
        // A second play does not start it again.
        time.advance(by: 100)
        #expect(try await rights.recordPlayStart(assetId: "film") == .valid(until: t0.addingTimeInterval(700)))
        try await rights.recordPlayStop(assetId: "film", watchedSeconds: 42)
        // Not playable: nothing recorded.
        #expect(try await rights.recordPlayStart(assetId: "early") == .notYetAvailable(from: t0.addingTimeInterval(1_800)))

        time.advance(by: 499.5)  // t0 + 699.5
        #expect(try await rights.rights(for: "film").isPlayable)
        time.advance(by: 1)  // t0 + 700.5
        #expect(try await rights.rights(for: "film") == .expired(.afterPlay))
        // The sweep deletes the files and says why.
        let filmFile = try #require(try await bench.engine.downloads.asset("film")?.localURL)
        try await sweep(bench, expecting: "film", .afterPlay)
        #expect(try await bench.engine.downloads.asset("film") == nil)
        #expect(!FileManager.default.fileExists(atPath: filmFile.path))
        #expect(try await rights.rights(for: "film") == .noRights)

        time.advance(by: 499)  // t0 + 1199.5
        #expect(try await rights.rights(for: "dated").isPlayable)
        time.advance(by: 1)  // t0 + 1200.5
        #expect(try await rights.rights(for: "dated") == .expired(.expiryDate))
        try await sweep(bench, expecting: "dated", .expiryDate)

        #expect(try await rights.rights(for: "early") == .notYetAvailable(from: t0.addingTimeInterval(1_800)))
        time.advance(by: 600)  // t0 + 1800.5
        #expect(try await rights.rights(for: "early") == .valid(until: t0.addingTimeInterval(3_600)))
        #expect(try await rights.playable().map(\.assetId) == ["early"])
        time.advance(by: 1_800)  // t0 + 3600.5
        #expect(try await rights.rights(for: "early") == .expired(.afterDownload))
        try await sweep(bench, expecting: "early", .afterDownload)

        // The backplane hears of every expiry and play.
        _ = try await bench.engine.uploadEvents()
        let logged = try await bench.server.storedEvents().map(\.event.content)
        #expect(Set(logged.filter { $0.type == .assetExpired }.compactMap(\.assetId)) == ["film", "dated", "early"])
        #expect(logged.filter { $0.type == .playStart }.compactMap(\.assetId) == ["film", "film"])
        #expect(logged.first { $0.type == .playStop }?.durationSeconds == 42)
        await bench.stop()
    }

    @Test func aQueuedAssetPastItsExpiryDateLeavesTheQueueUnfetched() async throws {
        let time = SimulatedTime()
        let bench = try await bench(time, settings: ApplicationSettingsUpdate())
        let now = try await trustedNow(bench)
        bench.origin.serve("/stale.mp4", TestOrigin.content(5_000))
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "stale", url: bench.origin.url("/stale.mp4"), availability: AssetAvailability(expiryDate: now.addingTimeInterval(-1))))
        _ = try await bench.events.wait(for: "assetExpired") { if case .assetExpired("stale", .expiryDate) = $0 { true } else { false } }
        #expect(try await bench.engine.downloads.asset("stale") == nil)
        #expect(bench.origin.requests("/stale.mp4") == 0)
        await bench.stop()
    }

    @Test func theOfflinePeriodLocksAndASyncUnlocks() async throws {
        let time = SimulatedTime()
        let bench = try await bench(time, settings: ApplicationSettingsUpdate { $0.offlineViewingPeriodSeconds = 3_600 })
        try await download(bench, "film")
        let synced = try await trustedNow(bench)
        #expect(try await bench.engine.rights.rights(for: "film") == .valid(until: synced.addingTimeInterval(3_600)))
        time.advance(by: 3_601)
        #expect(try await bench.engine.rights.rights(for: "film") == .offlinePeriodExceeded(lastSync: synced))
        #expect(try await bench.engine.rights.playable().isEmpty)
        // Locked, not expired: the sweep keeps it.
        try await bench.engine.rights.sweepExpired()
        #expect(try await bench.engine.downloads.asset("film")?.state == .completed)

        try await bench.engine.sync()
        let resynced = try await trustedNow(bench)
        #expect(resynced >= synced.addingTimeInterval(3_601))
        #expect(try await bench.engine.rights.rights(for: "film") == .valid(until: resynced.addingTimeInterval(3_600)))
        await bench.stop()
    }

    @Test func settingTheDeviceClockBackADayExtendsNothing() async throws {
        let time = SimulatedTime()
        let directory = temporaryDirectory("sdk-rights-clock")
        let bench = try await bench(time, settings: ApplicationSettingsUpdate { $0.expiryAfterDownloadSeconds = 7_200 }, dataDirectory: directory)
        try await download(bench, "film")
        // The app's own availability shortens what the backplane granted.
        try await download(bench, "short", availability: AssetAvailability(expiryAfterDownloadSeconds: 600))
        let downloaded = try await trustedNow(bench)
        let ends = downloaded.addingTimeInterval(7_200)
        #expect(try await bench.engine.rights.rights(for: "film") == .valid(until: ends))
        #expect(try await bench.engine.rights.rights(for: "short") == .valid(until: downloaded.addingTimeInterval(600)))

        // Offline, while the app runs: the wall clock leaves the monotonic one.
        await bench.server.stop()
        time.advance(by: 60)
        time.setWallClock(by: -86_400)
        #expect(try await bench.engine.rights.rights(for: "film") == .untrustedTime(.deviceClockChanged))
        #expect(try await bench.engine.rights.trustedTime() == .untrusted(.deviceClockChanged))
        _ = try await bench.events.wait(for: "trustedTimeLost")
        // "short" would have expired by now, but nothing is judged, let alone deleted, without time.
        time.advance(by: 600)
        #expect(try await bench.engine.rights.rights(for: "short") == .untrustedTime(.deviceClockChanged))
        try await bench.engine.rights.sweepExpired()
        #expect(try await bench.engine.downloads.asset("short")?.state == .completed)
        // The next sync trusts time again: "short" has expired, and "film" still ends where it did.
        let server = try await bench.server.restart()
        try await bench.engine.sync()
        #expect(try await bench.engine.rights.rights(for: "film") == .valid(until: ends))
        #expect(try await bench.engine.rights.rights(for: "short") == .expired(.afterDownload))
        try await sweep(bench, expecting: "short", .afterDownload)
        await bench.engine.shutdown()

        // While the app was not running: a new process finds the clock behind time it trusted.
        // (The sync learnt the day the clock was set back by; this is another.)
        time.advance(by: 600)
        time.setWallClock(by: -86_400)
        time.restartProcess()
        func engine() -> BackplaneEngine {
            var configuration = server.configuration(user: "dora", dataDirectory: directory)
            configuration.rights.deviceClock = time
            return BackplaneEngine(configuration: configuration)
        }
        let reopened = engine()
        #expect(try await reopened.rights.rights(for: "film") == .untrustedTime(.deviceClockChanged))
        try await reopened.start()
        #expect(try await reopened.rights.rights(for: "film") == .valid(until: ends))
        await reopened.shutdown()

        // A clock left where the last sync found it is trusted across a restart without a sync;
        // an expiry on that estimate locks the asset, and deletes it only once a sync confirms.
        time.restartProcess()
        let again = engine()
        let events = EventRecorder(again.events())
        #expect(try await again.rights.rights(for: "film") == .valid(until: ends))
        time.advance(by: 7_200)
        #expect(try await again.rights.rights(for: "film") == .expired(.afterDownload))
        try await again.rights.sweepExpired()
        #expect(try await again.downloads.asset("film")?.state == .completed)
        try await again.start()
        _ = try await events.wait(for: "assetExpired")
        #expect(try await again.downloads.asset("film") == nil)
        await again.shutdown()
        await bench.origin.stop()
        await server.stop()
    }

    @Test func aDeviceThatNeverSyncedHasNoTrustedTime() async throws {
        let time = SimulatedTime()
        let server = try await InProcessBackplane.start(now: { time.now })
        var configuration = server.configuration(user: "dora", dataDirectory: temporaryDirectory("sdk-rights-new"))
        configuration.rights.deviceClock = time
        let engine = BackplaneEngine(configuration: configuration)
        #expect(try await engine.rights.trustedTime() == .untrusted(.neverSynced))
        try await engine.start()
        // The backplane's time, to the second its answers carry.
        let trusted = try #require(try await engine.rights.trustedTime().date)
        #expect(abs(trusted.timeIntervalSince(time.now)) < 1)
        await engine.shutdown()
        await server.stop()
    }
}
