import Backplane
import ClientSDK
import Foundation
import Testing
import TestSupport

/// Every way an asset leaves the device (the user, a remote deletion, a wipe, the expiry sweep, a
/// queue flushed) goes through one removal: each asset is logged once (`assetDeleted` with the
/// reason, or `removedFromQueue` for a queued one) and announced once (`downloadRemoved` with
/// the reason), whatever the path (issue 50).
@Suite struct AssetRemovalTests {
    @Test func everyWayAnAssetLeavesLogsAndAnnouncesTheSameEvents() async throws {
        let time = SimulatedTime()
        let server = try await InProcessBackplane.start(now: { time.now })
        let bench = try await DownloadBench.start(server: server, rights: { rights in
            rights.deviceClock = time
            rights.sweepInterval = .seconds(3_600)
        })
        let engine = bench.engine
        let t0 = try #require(try await engine.rights.trustedTime().date)
        func download(_ assetId: String, availability: AssetAvailability? = nil) async throws {
            bench.origin.serve("/\(assetId).mp4", TestOrigin.content(3_000))
            try await engine.downloads.enqueue(DownloadRequest(assetId: assetId, url: bench.origin.url("/\(assetId).mp4"), availability: availability))
            #expect(try await bench.waitForOutcome(assetId).state == .completed)
        }
        for assetId in ["by-user", "by-command", "wiped-1", "wiped-2"] { try await download(assetId) }
        try await download("expiring", availability: AssetAvailability(expiryDate: t0.addingTimeInterval(600)))
        let deviceId = try #require(await engine.status.deviceId)

        // The user deletes one; the backplane deletes another.
        try await engine.downloads.remove(assetId: "by-user")
        let deletion = try await server.enqueue(.deleteAssets, device: deviceId, assetIds: ["by-command"])
        try await engine.sync()
        try await server.waitForCommand(deletion.commandId, toBe: .succeeded)
        // One expires and is swept.
        time.advance(by: 601)
        try await engine.rights.sweepExpired()
        _ = try await bench.events.wait(for: "assetExpired")
        // Two wait in a queue that is switched off: one the user removes, the other goes with a flush.
        try await engine.downloads.setEnabled(false)
        for assetId in ["queued-1", "queued-2"] {
            try await engine.downloads.enqueue(DownloadRequest(assetId: assetId, url: bench.origin.url("/never.mp4")))
        }
        try await engine.downloads.remove(assetId: "queued-1")
        try await engine.downloads.flush()
        // And the backplane wipes the rest.
        let wipe = try await server.enqueue(.wipe, device: deviceId)
        try await engine.sync()
        try await server.waitForCommand(wipe.commandId, toBe: .succeeded)
        #expect(try await engine.downloads.asset("wiped-1") == nil)

        let expected: [String: AssetDeletionReason] = [
            "by-user": .user, "by-command": .remote, "expiring": .internal, "queued-1": .user, "queued-2": .user,
            "wiped-1": .deleteAll, "wiped-2": .deleteAll,
        ]
        // Announced in the app: one downloadRemoved per asset, with its reason.
        let announced = bench.events.all.compactMap { event -> (String, AssetDeletionReason)? in
            if case .downloadRemoved(let assetId, let reason) = event { (assetId, reason) } else { nil }
        }
        #expect(announced.count == expected.count, "\(announced)")
        #expect(Dictionary(announced, uniquingKeysWith: { first, _ in first }) == expected)

        // Logged for the backplane: one event per asset, of the same form for every path.
        _ = try await engine.uploadEvents()
        let logged = try await server.storedEvents(EventFilter(deviceId: deviceId)).map(\.event.content)
        let deleted = logged.filter { $0.type == .assetDeleted }
        #expect(deleted.count == 5, "\(deleted)")
        #expect(Dictionary(deleted.map { ($0.assetId ?? "", $0.deletionReason) }, uniquingKeysWith: { first, _ in first })
            == expected.filter { !$0.key.hasPrefix("queued") }.mapValues { Optional($0) })
        #expect(logged.filter { $0.type == .removedFromQueue }.compactMap(\.assetId).sorted() == ["queued-1", "queued-2"])
        await bench.stop()
    }
}
