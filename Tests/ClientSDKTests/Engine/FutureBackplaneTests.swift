import Backplane
import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// The SDK in an app that is not updated, against a backplane released after it: answers that
/// carry command types, states, codes and kinds this build has never heard of. Every one must
/// decode, and the SDK must keep syncing, wiping and reporting (issue 50). Turning any of these
/// vocabularies back into a closed enum makes these tests fail.
@Suite struct FutureBackplaneTests {
    /// A sync answer of a later backplane: a command type, a command state, a push provider and a
    /// section this SDK does not know, beside a wipe it does.
    static let syncAnswer = """
        {"device": {"deviceId": "d1", "userId": "u", "platform": "ios", "downloadEnabled": true, "pushProvider": "hms",
           "registeredAt": "2026-11-01T00:00:00Z", "updatedAt": "2026-11-01T00:00:00Z", "lastSeenAt": "2026-11-01T00:00:00Z",
           "licenseSlots": 3},
         "settings": {"deviceLimit": 5, "expiryAfterDownloadSeconds": -1, "expiryAfterPlaySeconds": -1,
           "offlineViewingPeriodSeconds": -1, "maxDownloadsPerDevice": 100, "maxDownloadsPerAccount": -1,
           "maxLifetimeDownloadsPerAsset": -1, "maxCopiesPerAccount": -1, "maxLicensesPerDevice": 4},
         "serverTime": "2026-11-28T00:00:00Z",
         "commands": [
           {"commandId": "c1", "deviceId": "d1", "type": "renewLicense", "state": "deliveredAgain", "licenseId": "l1",
            "createdAt": "2026-11-27T00:00:00Z", "deferrals": 0},
           {"commandId": "c2", "deviceId": "d1", "type": "wipe", "state": "delivered", "createdAt": "2026-11-27T00:00:00Z", "deferrals": 0}],
         "ackResults": [{"commandId": "c0", "status": "superseded"}],
         "downloadReportResults": [{"grantId": "g1", "status": "accepted", "state": "suspended"}],
         "licenseResults": [{"licenseId": "l1", "status": "renewed"}]}
        """

    @Test func todaysTypesReadEveryAnswerOfALaterBackplane() throws {
        let decoder = WireJSON.decoder()
        let sync = try decoder.decode(SyncResponse.self, from: Data(Self.syncAnswer.utf8))
        #expect(sync.commands.map(\.type) == [CommandType(rawValue: "renewLicense"), .wipe])
        #expect(sync.commands[0].type.isKnown == false)
        #expect(sync.commands[0].state.rawValue == "deliveredAgain")
        #expect(sync.commands[1].type.isKnown)
        #expect(sync.device.pushProvider?.rawValue == "hms")
        #expect(sync.ackResults.first?.status.rawValue == "superseded")
        #expect(sync.downloadReportResults.first?.state?.rawValue == "suspended")

        let error = try decoder.decode(ErrorBody.self, from: Data(#"""
            {"error": {"code": "license_revoked", "message": "The license was taken back.", "details": {"licenseId": "l1"}}}
            """#.utf8))
        #expect(error.error.code == ErrorCode(rawValue: "license_revoked"))
        #expect(!error.error.code.isKnown)

        let list = try decoder.decode(CommandList.self, from: Data(#"""
            {"commands": [{"commandId": "c3", "deviceId": "d1", "type": "recordLive", "state": "scheduled",
              "createdAt": "2026-11-27T00:00:00Z", "deferrals": 0}]}
            """#.utf8))
        #expect(list.commands.map(\.type.rawValue) == ["recordLive"])

        let changes = try decoder.decode(EpisodeChanges.self, from: Data(#"""
            {"changes": [{"kind": "rescheduled", "feedId": "f", "assetId": "a",
              "episode": {"feedId": "f", "episode": {"assetId": "a", "downloadURL": "https://cdn/a/index.cmfv", "mediaType": "cmaf"},
                "announcedAt": "2026-11-27T00:00:00Z", "updatedAt": "2026-11-27T00:00:00Z"}}],
             "cursor": "c", "hasMore": false, "serverTime": "2026-11-28T00:00:00Z"}
            """#.utf8))
        #expect(changes.changes.first?.kind.rawValue == "rescheduled")
        #expect(changes.changes.first?.episode?.episode.mediaType?.rawValue == "cmaf")
    }

    @Test func anEngineRunsTheCommandsItKnowsAndSaysItCannotRunTheOthers() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let engine = BackplaneEngine(configuration: server.configuration(user: "old-app", dataDirectory: temporaryDirectory("sdk-future")))
        let events = EventRecorder(engine.events())
        try await engine.addDownloadedAsset(assetId: "a1", copying: try makeContentFile(named: "a1.mp4"))
        try await engine.start()
        let deviceId = try #require(await engine.status.deviceId)

        // What a later backplane wrote to the queue: a type this SDK does not know, before a wipe.
        let now = server.now()
        let future = CommandRecord(
            commandId: "future-1", applicationId: server.applicationId, deviceId: deviceId, type: CommandType(rawValue: "renewLicense"),
            state: .pending, createdAt: now, updatedAt: now)
        _ = try await server.services.store.insertCommands([future])
        let wipe = try await server.enqueue(.wipe, device: deviceId)

        try await engine.sync()
        _ = try await events.wait(for: "remoteWipe")
        #expect(try await engine.downloadedAssets().isEmpty)
        try await server.waitForCommand(wipe.commandId, toBe: .succeeded)
        try await server.waitForCommand("future-1", toBe: .failed)
        let refused = try await server.services.commands.command(applicationId: server.applicationId, commandId: "future-1")
        #expect(refused.failureReason == "unsupported")

        // It keeps syncing, and what it logged reaches the backplane.
        try await engine.sync()
        _ = try await engine.uploadEvents()
        #expect(try await server.hasWipeLog(device: deviceId, assets: ["a1"]))
        await engine.shutdown()
    }

    /// An error code this SDK does not know is read as the backplane's answer and judged by its
    /// status: a 4xx is not worth retrying (the start says so), a 5xx or 429 is (the start goes
    /// on offline, and the engine reports a communications failure and retries).
    @Test(arguments: [(403, false), (409, false), (429, true), (503, true)])
    func anErrorCodeFromALaterBackplaneIsJudgedByItsStatus(status: Int, transient: Bool) async throws {
        let engine = scriptedEngine(status: status, body: #"{"error": {"code": "region_blocked", "message": "Not here."}}"#)
        let events = EventRecorder(engine.events())
        let error: BackplaneClientError
        if transient {
            try await engine.start()
            guard case .communicationsFailure(let reported) = try await events.wait(for: "communicationsFailure") else { return }
            error = reported
        } else {
            error = try await #require(throws: BackplaneClientError.self) { try await engine.start() }
        }
        #expect(error.kind == .server)
        #expect(error.status == status)
        #expect(error.code?.rawValue == "region_blocked")
        #expect(error.message == "Not here.")
        #expect(error.isTransient == transient)
        await engine.shutdown()
    }

    /// A 4xx without the backplane's error body (a proxy's) is not worth retrying either.
    @Test(arguments: [(404, false), (413, false), (408, true), (502, true)])
    func aProxysAnswerIsJudgedByItsStatusToo(status: Int, transient: Bool) async throws {
        let engine = scriptedEngine(status: status, body: "<html>nope</html>")
        if transient {
            try await engine.start()
        } else {
            let error = try await #require(throws: BackplaneClientError.self) { try await engine.start() }
            #expect(error.status == status)
            #expect(!error.isTransient)
        }
        await engine.shutdown()
    }

    private func scriptedEngine(status: Int, body: String) -> BackplaneEngine {
        BackplaneEngine(configuration: BackplaneClientConfiguration(
            backplaneURL: URL(string: "http://127.0.0.1:9")!, appKeyId: "ak", appKeySecret: "secret", userId: "u",
            dataDirectory: temporaryDirectory("sdk-future-code"), sync: SyncOptions(interval: .seconds(3600), useWakeUpChannel: false),
            transport: ScriptedTransport(status: status, body: body)))
    }
}
