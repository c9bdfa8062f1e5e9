import ClientSDK
import Foundation
import Testing
import TestSupport

/// The device's power as the app reports it (in an app, from `UIDevice` or `BatteryManager`).
typealias SwitchablePower = SwitchableStatus<PowerStatus>

extension SwitchableStatus: PowerMonitor where Status == PowerStatus {}

/// The conditions an app sets beside the network rule (`DownloadConditions`): the queue waits
/// with the condition's reason, a change that breaks one stops the file under way, and the
/// download goes on when they hold again.
@Suite struct DeviceConditionTests {
    /// An HLS asset of 40 slow audio segments; returns the count of segment requests so far.
    private func slowAsset(_ bench: DownloadBench) async throws -> @Sendable () -> Int {
        _ = TestHLSAsset(serving: bench.origin, segments: 40, segmentBytes: 30_000)
        for index in 0..<40 { bench.origin.inject(.delay(.milliseconds(30)), at: "/hls/audio/en/\(index).aac") }
        try await bench.engine.downloads.enqueue(DownloadRequest(
            assetId: "show", url: bench.origin.url("/hls/master.m3u8"), kind: .hls, maxVideoBitrate: 0, audioLanguages: ["en"],
            subtitleLanguages: []))
        let origin = bench.origin
        return { origin.requests(under: "/hls/audio/en/").values.reduce(0, +) }
    }

    private func waitForBlock(_ bench: DownloadBench, _ block: DownloadBlock) async throws {
        try await bench.wait("the queue to block on \(block.rawValue)") {
            try await bench.engine.downloads.status() == .blocked(block)
        }
        #expect(try await bench.engine.downloads.asset("show")?.state == .blocked(block))
        try await bench.events.wait(for: "downloadsBlocked") { if case .downloadsBlocked(block) = $0 { true } else { false } }
    }

    @Test func aLowBatteryHoldsDownloadsUntilTheChargerOrAFullerBattery() async throws {
        let power = SwitchablePower(PowerStatus(batteryLevel: 0.15, isCharging: false))
        let bench = try await DownloadBench.start {
            $0.power = power
            $0.conditions = DownloadConditions(minimumBatteryLevel: 0.2)
            $0.parallelFiles = 2
        }
        let segments = try await slowAsset(bench)

        // Off the charger at 15 %, below the 20 % asked for: blocked, no segment fetched.
        try await waitForBlock(bench, .battery)
        #expect(segments() == 0)

        // On the charger the level does not matter: it starts.
        power.set(PowerStatus(batteryLevel: 0.15, isCharging: true))
        try await bench.wait("part of the download") {
            try await bench.engine.downloads.asset("show").map { $0.bytesDownloaded > 200_000 } ?? false
        }
        // Unplugged again: the file under way stops, and nothing more is asked.
        power.set(PowerStatus(batteryLevel: 0.14, isCharging: false))
        try await waitForBlock(bench, .battery)
        let askedOnLowBattery = segments()
        #expect(askedOnLowBattery < 40, "the download finished before the charger was pulled")
        try await Task.sleep(for: .milliseconds(300))
        #expect(segments() == askedOnLowBattery)

        // Charged past the minimum off the charger: it completes.
        power.set(PowerStatus(batteryLevel: 0.2, isCharging: false))
        #expect(try await bench.waitForOutcome("show").state == .completed)
        await bench.stop()
    }

    @Test func aChargerRequiredHoldsDownloadsUntilPluggedIn() async throws {
        let power = SwitchablePower(PowerStatus(batteryLevel: 0.9, isCharging: false))
        let bench = try await DownloadBench.start {
            $0.power = power
            $0.conditions = DownloadConditions(requiresCharging: true)
        }
        let segments = try await slowAsset(bench)
        try await waitForBlock(bench, .charging)
        #expect(segments() == 0)
        power.set(PowerStatus(batteryLevel: 0.9, isCharging: true))
        #expect(try await bench.waitForOutcome("show").state == .completed)
        #expect(segments() == 40)
        await bench.stop()
    }

    @Test func anUnmeteredNetworkRequiredWaitsOutMeteredAndExpensiveOnes() async throws {
        // Cellular is allowed by the network rule, but the app asks for unmetered.
        let network = SwitchableNetwork(SwitchableNetwork.cellular)
        let bench = try await DownloadBench.start {
            $0.network = network
            $0.downloadOverCellular = true
            $0.conditions = DownloadConditions(requiresUnmeteredNetwork: true)
        }
        let segments = try await slowAsset(bench)
        try await waitForBlock(bench, .meteredNetwork)
        network.set(NetworkStatus(isAvailable: true, isExpensive: false, isMetered: true))
        try await Task.sleep(for: .milliseconds(200))
        #expect(try await bench.engine.downloads.status() == .blocked(.meteredNetwork))
        #expect(segments() == 0)
        network.set(SwitchableNetwork.wifi)
        #expect(try await bench.waitForOutcome("show").state == .completed)
        await bench.stop()
    }

    @Test func levelsAreClamped() {
        var conditions = DownloadConditions(minimumBatteryLevel: 1.7)
        #expect(conditions.minimumBatteryLevel == 1)
        conditions.minimumBatteryLevel = -3
        #expect(conditions.minimumBatteryLevel == 0)
        #expect(PowerStatus(batteryLevel: .nan, isCharging: false).batteryLevel == 0)
        #expect(PowerStatus(batteryLevel: 42, isCharging: false).batteryLevel == 1)
        // iOS says -1 when it does not know: unknown, which holds nothing back.
        #expect(PowerStatus(batteryLevel: -1, isCharging: false).batteryLevel == nil)
    }
}
