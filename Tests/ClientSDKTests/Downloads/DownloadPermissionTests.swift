import Backplane
import ClientSDK
import Foundation
import Testing
import TestSupport

/// The download engine asks the backplane before each download and tells it, in its syncs, what
/// became of every granted one.
@Suite struct DownloadPermissionTests {
    private func grants(_ bench: DownloadBench) async throws -> [String: DownloadGrantState] {
        let page = try await bench.server.services.grants.list(
            applicationId: bench.server.applicationId, userId: "dora", deviceId: nil, cursor: nil, limit: 100)
        return Dictionary(page.grants.map { ($0.assetId, $0.state) }, uniquingKeysWith: { newest, _ in newest })
    }

    @Test func aDeniedAssetWaitsUntilTheDeviceDeletesWhatHoldsItsPlace() async throws {
        // No retry pass within the test: only a sync asks again.
        let bench = try await DownloadBench.start { $0.retryPassDelay = .seconds(3_600) }
        _ = try await bench.server.services.applications.updateSettings(
            applicationId: bench.server.applicationId, ApplicationSettingsUpdate { $0.maxDownloadsPerAccount = 1 })
        try await bench.engine.sync()
        for name in ["one", "two"] {
            bench.origin.serve("/\(name).mp4", TestOrigin.content(10_000))
            try await bench.engine.downloads.enqueue(DownloadRequest(assetId: name, url: bench.origin.url("/\(name).mp4")))
        }
        #expect(try await bench.waitForOutcome("one").state == .completed)
        guard case .downloadDenied(let assetId, let rule, let counts, let permanent) = try await bench.events.wait(for: "downloadDenied") else {
            Issue.record("downloadDenied carries no denial")
            return
        }
        #expect(assetId == "two" && rule == .account && !permanent)
        #expect(counts?.account == DownloadCount(used: 1, limit: 1))
        #expect(bench.origin.requests("/two.mp4") == 0)
        let two = try await bench.engine.downloads.asset("two")
        #expect(two?.state == .blocked(.permissionDenied))
        #expect(two?.permission == .denied(DownloadDenial(rule: .account, counts: counts, permanent: false)))
        guard case .granted = try await bench.engine.downloads.asset("one")?.permission else {
            Issue.record("one was not granted")
            return
        }

        // The completion goes up with the next sync.
        try await bench.engine.sync()
        #expect(try await grants(bench) == ["one": .completed])

        // Deleting "one" frees the account's place once the backplane hears of it; "two" follows.
        try await bench.engine.downloads.remove(assetId: "one")
        try await bench.engine.sync()
        #expect(try await bench.waitForOutcome("two").state == .completed)
        try await bench.engine.sync()
        #expect(try await grants(bench) == ["one": .deleted, "two": .completed])
        await bench.stop()
    }

    @Test func askedAtQueueTimeADenialQueuesNothing() async throws {
        let bench = try await DownloadBench.start { $0.permissionTiming = .atQueueTime }
        _ = try await bench.server.services.applications.updateSettings(
            applicationId: bench.server.applicationId, ApplicationSettingsUpdate { $0.maxDownloadsPerAccount = 1 })
        try await bench.engine.sync()
        for name in ["one", "two"] { bench.origin.serve("/\(name).mp4", TestOrigin.content(10_000)) }
        let one = try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "one", url: bench.origin.url("/one.mp4")))
        guard case .granted = one.permission else {
            Issue.record("one is queued without its grant: \(one.permission)")
            return
        }
        await #expect {
            try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "two", url: bench.origin.url("/two.mp4")))
        } throws: { error in
            (error as? BackplaneClientError)?.code == .downloadLimitReached
        }
        #expect(try await bench.engine.downloads.asset("two") == nil)
        _ = try await bench.events.wait(for: "downloadDenied")
        #expect(try await bench.waitForOutcome("one").state == .completed)
        #expect(bench.origin.requests("/two.mp4") == 0)
        #expect(try await grants(bench) == ["one": .active])
        await bench.stop()
    }

    @Test func aLifetimeDenialFailsTheAssetWithoutFetchingIt() async throws {
        let bench = try await DownloadBench.start()
        _ = try await bench.server.services.applications.updateSettings(
            applicationId: bench.server.applicationId, ApplicationSettingsUpdate { $0.maxLifetimeDownloadsPerAsset = 0 })
        try await bench.engine.sync()
        bench.origin.serve("/film.mp4", TestOrigin.content(10_000))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "film", url: bench.origin.url("/film.mp4")))
        let asset = try await bench.waitForOutcome("film")
        guard case .failed(let failure) = asset.state else {
            Issue.record("film is \(asset.state), not failed")
            return
        }
        #expect(failure.kind == .permissionDenied)
        guard case .downloadDenied(_, let rule, _, let permanent) = try await bench.events.wait(for: "downloadDenied") else {
            Issue.record("downloadDenied carries no denial")
            return
        }
        #expect(rule == .assetLifetime && permanent)
        #expect(bench.origin.requests("/film.mp4") == 0)
        #expect(try await grants(bench).isEmpty)
        await bench.stop()
    }

    @Test func withoutLimitsNothingIsAskedUnlessTheAppAsksAlways() async throws {
        let server = try await InProcessBackplane.start()
        _ = try await server.services.applications.updateSettings(
            applicationId: server.applicationId, ApplicationSettingsUpdate { $0.maxDownloadsPerDevice = -1 })
        let bench = try await DownloadBench.start(server: server)
        bench.origin.serve("/free.mp4", TestOrigin.content(10_000))
        try await bench.engine.downloads.enqueue(DownloadRequest(assetId: "free", url: bench.origin.url("/free.mp4")))
        #expect(try await bench.waitForOutcome("free").state == .completed)
        #expect(try await grants(bench).isEmpty)
        await bench.engine.shutdown()
        await bench.origin.stop()

        let asking = try await DownloadBench.start(user: "dora", server: server) { $0.askPermission = .always }
        asking.origin.serve("/asked.mp4", TestOrigin.content(10_000))
        try await asking.engine.downloads.enqueue(DownloadRequest(assetId: "asked", url: asking.origin.url("/asked.mp4")))
        #expect(try await asking.waitForOutcome("asked").state == .completed)
        #expect(try await grants(asking) == ["asked": .active])
        await asking.stop()
    }
}
