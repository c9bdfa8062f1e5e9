import Backplane
import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

@Suite struct EventLoggerTests {
    @Test func aQueueLeftByAKilledAppIsUploadedByTheNextStart() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let dataDir = temporaryDirectory("sdk-events-restart")
        defer { try? FileManager.default.removeItem(at: dataDir) }

        // The app logs while offline (never started) and is killed: no shutdown, nothing sent.
        do {
            let first = BackplaneEngine(configuration: server.configuration(user: "ann", dataDirectory: dataDir))
            var sequences: [Int64] = []
            for index in 1...25 {
                let event = try #require(try first.eventLogger.log(.custom(name: "offline", number: Double(index))))
                sequences.append(event.sequence)
            }
            #expect(sequences == sequences.sorted() && Set(sequences).count == 25)
            #expect(try first.eventLogger.queuedCount() == 26)  // with the install's reset
        }
        #expect(try await server.storedEvents().isEmpty)

        let second = BackplaneEngine(configuration: server.configuration(user: "ann", dataDirectory: dataDir))
        let events = EventRecorder(second.events())
        try await second.start()
        try await events.wait(for: "logsSent")
        let stored = try await server.storedEvents()
        let custom = stored.filter { $0.event.content.type == .custom }
        #expect(custom.map { $0.event.content.customNumber } == (1...25).map(Double.init))
        #expect(stored.contains { $0.event.content.type == .reset && $0.event.content.resetType == .install })
        #expect(stored.contains { $0.event.content.type == .appLaunch })
        let deviceId = await second.status.deviceId
        #expect(stored.allSatisfy { $0.deviceId == deviceId && $0.event.userId == "ann" })
        #expect(try second.eventLogger.queuedCount() == 0)
        await second.shutdown()
    }

    @Test func disabledTypesAreNotSentAndMandatoryOnesAlwaysAre() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        var configuration = server.configuration(user: "bea", dataDirectory: temporaryDirectory("sdk-events-disabled"))
        configuration.eventLog.disabledTypes = [.playStart, .downloadStart]
        let engine = BackplaneEngine(configuration: configuration)
        let logger = engine.eventLogger
        #expect(!logger.isLoggingEnabled(for: .playStart))
        #expect(logger.isLoggingEnabled(for: .downloadStart), "a mandatory type was disabled by the configuration")
        logger.setLoggingEnabledForAllEvents(false)
        logger.setLoggingEnabled(false, for: .reset)  // ignored: mandatory
        #expect(EventType.mandatory.allSatisfy { logger.isLoggingEnabled(for: $0) })
        #expect(try logger.log(.playStart(assetId: "a")) == nil)
        #expect(try logger.log(.playStop(assetId: "a")) == nil)
        #expect(try logger.log(.downloadStart(assetId: "a")) != nil)
        #expect(try logger.log(.downloadComplete(assetId: "a", bitrate: 5_000_000)) != nil)
        logger.setLoggingEnabled(true, for: .playStop)
        logger.appState = .background
        #expect(try logger.log(.playStop(assetId: "a", durationSeconds: 42)) != nil)

        let events = EventRecorder(engine.events())
        try await engine.start()  // its appLaunch is disabled too
        try await events.wait(for: "logsSent")
        let types = try await server.storedEvents().map(\.event.content.type)
        #expect(types == [.reset, .downloadStart, .downloadComplete, .playStop])
        let playStop = try #require(try await server.storedEvents(EventFilter(type: .playStop)).first)
        #expect(playStop.event.appState == .background)
        #expect(playStop.event.content.durationSeconds == 42)
        await engine.shutdown()
    }

    @Test func anEventTheBackplaneWouldRefuseIsNotQueued() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        let engine = BackplaneEngine(configuration: server.configuration(user: "cy", dataDirectory: temporaryDirectory("sdk-events-invalid")))
        let before = try engine.eventLogger.queuedCount()
        let tooLong = #expect(throws: BackplaneClientError.self) {
            try engine.eventLogger.log(.custom(name: "n", string: String(repeating: "z", count: WireLimits.maxEventMessageBytes + 1)))
        }
        #expect(tooLong?.kind == .invalidInput)
        #expect(tooLong?.message.contains("customString") == true)
        let noAsset = #expect(throws: BackplaneClientError.self) { try engine.eventLogger.log(EventContent(type: .assetDeleted)) }
        #expect(noAsset?.kind == .invalidInput)
        // A vocabulary's values are open to decoding, not to making up: the backplane knows only its own.
        let madeUp = #expect(throws: BackplaneClientError.self) { try engine.eventLogger.log(EventContent(type: EventType(rawValue: "teleport"))) }
        #expect(madeUp?.message.contains("'teleport' is not a known type") == true, "\(String(describing: madeUp))")
        let madeUpReason = #expect(throws: BackplaneClientError.self) {
            try engine.eventLogger.log(.assetDeleted(assetId: "a", reason: AssetDeletionReason(rawValue: "vanished")))
        }
        #expect(madeUpReason?.message.contains("deletionReason") == true)
        #expect(try engine.eventLogger.queuedCount() == before)
    }

    @Test func eventsGoUpWhenEnoughAreQueuedOrTheOldestIsOldEnough() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        var configuration = server.configuration(user: "dan", dataDirectory: temporaryDirectory("sdk-events-batching"))
        configuration.eventLog.uploadThreshold = 10
        configuration.eventLog.maxAge = .seconds(3600)
        let engine = BackplaneEngine(configuration: configuration)
        let events = EventRecorder(engine.events())
        try await engine.start()
        try await events.wait(for: "logsSent")  // the install and launch events, sent after the first sync
        let baseline = try await server.storedEvents().count

        for index in 1...9 { try engine.eventLogger.log(.custom(name: "tick", number: Double(index))) }
        try await Task.sleep(for: .milliseconds(500))
        #expect(try await server.storedEvents().count == baseline, "uploaded below the count threshold")
        try engine.eventLogger.log(.custom(name: "tick", number: 10))
        let deadline = ContinuousClock.now + .seconds(10)
        while try await server.storedEvents().count < baseline + 10, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try await server.storedEvents().count == baseline + 10)
        await engine.shutdown()

        // By age: one event, a short maximum age.
        var aged = configuration
        aged.eventLog.uploadThreshold = 1000
        aged.eventLog.maxAge = .milliseconds(300)
        let again = BackplaneEngine(configuration: aged)
        let againEvents = EventRecorder(again.events())
        try await again.start()
        try await againEvents.wait(for: "logsSent")  // the launch, sent after the start's sync
        try again.eventLogger.log(.custom(name: "lonely"))
        let logged = ContinuousClock.now
        func lonelyStored() async throws -> Bool {
            try await server.storedEvents(EventFilter(type: .custom)).contains { $0.event.content.customName == "lonely" }
        }
        while try await !lonelyStored(), ContinuousClock.now < logged + .seconds(10) {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try await lonelyStored(), "one young event below the threshold was never sent")
        await again.shutdown()
    }

    @Test func anUploadThatFailsIsRetriedAndNothingIsLostOrDoubled() async throws {
        let server = try await InProcessBackplane.start()
        let dataDir = temporaryDirectory("sdk-events-outage")
        var configuration = server.configuration(user: "eve", dataDirectory: dataDir)
        configuration.eventLog.uploadThreshold = 5
        configuration.eventLog.batchSize = 5
        let engine = BackplaneEngine(configuration: configuration)
        let events = EventRecorder(engine.events())
        try await engine.start()
        try await events.wait(for: "logsSent")
        await server.stop()
        for index in 1...40 { try engine.eventLogger.log(.custom(name: "outage", number: Double(index))) }
        // An upload on a connection kept from before the stop fails only at its deadline.
        try await events.wait(for: "communicationsFailure", timeout: .seconds(30))
        let restarted = try await server.restart()
        defer { Task { await restarted.stop() } }
        let deadline = ContinuousClock.now + .seconds(30)
        while try engine.eventLogger.queuedCount() > 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        // In sequence order (a batch held in the client during the outage arrives late, and its
        // corrected times with it: the skew includes the time in transit).
        let numbers = try await restarted.storedEvents(EventFilter(type: .custom))
            .sorted { $0.event.sequence < $1.event.sequence }.compactMap(\.event.content.customNumber)
        #expect(numbers == (1...40).map(Double.init))
        await engine.shutdown()
    }

    /// A batch size set after `init` is held to the backplane's limit like one given to `init`:
    /// before, 10,000 went through unclamped, the backplane refused every batch over 500 whole,
    /// and the uploader asked again forever.
    @Test func aBatchSizeSetAfterInitIsHeldToTheBackplanesLimit() async throws {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        var configuration = server.configuration(user: "bea", dataDirectory: temporaryDirectory("sdk-events-batch"))
        configuration.eventLog.batchSize = 10_000
        configuration.eventLog.uploadThreshold = 0
        #expect(configuration.eventLog.batchSize == WireLimits.maxEventsPerBatch)
        #expect(configuration.eventLog.uploadThreshold == 1)
        configuration.eventLog.uploadThreshold = 1_000_000
        let engine = BackplaneEngine(configuration: configuration)
        try await engine.start()
        for index in 1...(WireLimits.maxEventsPerBatch + 100) {
            try engine.eventLogger.log(.custom(name: "bulk", number: Double(index)))
        }
        try await engine.uploadEvents()
        #expect(try engine.eventLogger.queuedCount() == 0)
        #expect(try await server.storedEvents(EventFilter(type: .custom)).count == WireLimits.maxEventsPerBatch + 100)
        await engine.shutdown()
    }

    @Test func retryAndSyncValuesAreClampedHoweverTheyAreSet() {
        var retry = RetryPolicy()
        retry.jitter = 7
        retry.multiplier = 0.1
        retry.initial = .zero
        #expect(retry.jitter == 1)
        #expect(retry.multiplier == 1)
        #expect(retry.initial == .milliseconds(1))
        #expect(RetryPolicy(jitter: .nan).jitter == 0)
        var sync = SyncOptions(interval: .zero)
        #expect(sync.interval == SyncOptions.minimumInterval)
        sync.interval = .milliseconds(-5)
        #expect(sync.interval == SyncOptions.minimumInterval)
        sync.requestTimeout = .zero
        #expect(sync.requestTimeout == .seconds(1))
    }
}
