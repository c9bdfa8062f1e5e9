import Backplane
import ClientSDK
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// Every answer the SDK reads, recorded from a real backplane, then replayed with one part
/// replaced by something hostile: absurd numbers and dates, wrong types, missing, emptied or
/// multiplied parts, truncated, nested or non-UTF-8 bodies. What a broken proxy, a tampered
/// connection or a buggy server could send. The SDK must take it or throw a
/// `BackplaneClientError` — never crash, hang (30 s) or throw anything else.
@Suite struct MutatedAnswerTests {
    /// The real answers, recorded once for all the cases below.
    private static let recording = Task { try await recordAnswers() }

    @Test func everyRouteIsRecordedAndThousandsOfAnswersAreMutated() async throws {
        let recorded = try await Self.recording.value
        // Each route the SDK reads an answer from was exercised against the real server.
        let unrecorded = Set(Route.operations.keys).subtracting(recorded.keys)
        #expect(unrecorded.isEmpty, "unrecorded: \(unrecorded)")
        // What the cases below try: every mutation of every answer.
        let answers = recorded.values.map(\.body) + Route.errorAnswers.map(\.1.body)
        let mutations = answers.reduce(0) { $0 + Mutation.all(of: $1).count }
        #expect(mutations > 4000, "only \(mutations) mutated answers")
    }

    /// A case per route (each with its own transport and engines), one at a time: side by side
    /// the eleven would take both cores from the rest of the suite, whose requests to their
    /// backplanes then miss their deadlines.
    @Test(.serialized, arguments: Route.operations.keys.sorted())
    func everyMutatedAnswerIsTakenOrRefusedWithAClientError(route: String) async throws {
        let recorded = try await Self.recording.value
        let original = try #require(recorded[route], "\(route) was not recorded")
        try await exercise(route, original, answers: recorded)
        // The error bodies the SDK reads details from, mutated the same way.
        for (errorRoute, error) in Route.errorAnswers where errorRoute == route {
            try await exercise(route, error, answers: recorded)
        }
    }

    /// Answers `route` with every mutation of `original` in turn and checks what the SDK made of
    /// each.
    private func exercise(_ route: String, _ original: TransportResponse, answers: [String: TransportResponse]) async throws {
        let operation = try #require(Route.operations[route], "no operation reads \(route)")
        let mutations = Mutation.all(of: original.body)
        let transport = ReplayingTransport(answers: answers)
        // Registration and unregistration end an engine's life cycle: a fresh engine for each
        // answer. Every other route: one engine that lives through all of its mutations, as an app
        // does through a run of bad answers.
        let sharedDirectory = temporaryDirectory("sdk-mutated")
        defer { try? FileManager.default.removeItem(at: sharedDirectory) }
        let sharedEngine: BackplaneEngine? = operation.needsFreshEngine ? nil : try await Self.startedEngine(transport, in: sharedDirectory)
        let requestsBefore = transport.requestCount
        for mutation in mutations {
            transport.override(route, with: TransportResponse(status: original.status, body: mutation.body))
            let engine: BackplaneEngine
            let directory = temporaryDirectory("sdk-mutated")
            if let sharedEngine {
                engine = sharedEngine
            } else {
                engine = try await Self.startedEngine(transport, in: directory, registering: route != Route.register)
            }
            let outcome = await Self.run(within: .seconds(30)) { try await operation.run(engine) }
            switch outcome {
            case .finished, .threwClientError: break
            case .threw(let error):
                Issue.record("\(route) answered \(original.status) with \(mutation.name): threw \(error), not a BackplaneClientError")
            case .timedOut:
                Issue.record("\(route) answered \(original.status) with \(mutation.name): no outcome within 30 s")
                return  // the engine is stuck; what follows would only time out too
            }
            transport.override(route, with: nil)
            if sharedEngine == nil {
                await engine.shutdown()
                try? FileManager.default.removeItem(at: directory)
            }
        }
        // A bad answer is not a reason to ask again at once: an operation takes a few requests,
        // and background work backs off.
        let requests = transport.requestCount - requestsBefore
        #expect(requests < mutations.count * 20, "\(route): \(requests) requests for \(mutations.count) mutated answers")
        if let sharedEngine {
            // Still working after all that: the unmutated answer goes through. A background
            // upload sent while the last mutation was served may still be under way, and the
            // first call joins it and shares its refusal: a second call must then go through.
            let refusal = LockedBox<String?>(nil)
            var outcome = await Self.run(within: .seconds(30), clientError: refusal) { try await operation.run(sharedEngine) }
            if outcome == .threwClientError, route == "POST /v1/events" {
                outcome = await Self.run(within: .seconds(30), clientError: refusal) { try await operation.run(sharedEngine) }
            }
            #expect(outcome == .finished, "\(route) after its mutations: \(refusal.withLock { $0 } ?? "no error")")
            await sharedEngine.shutdown()
        }
    }

    // MARK: recording real answers

    /// Plays every SDK operation against a real backplane (a feed with episodes, a pending
    /// command, queued events) and keeps the fullest 2xx answer of each route.
    private static func recordAnswers() async throws -> [String: TransportResponse] {
        let server = try await InProcessBackplane.start()
        defer { Task { await server.stop() } }
        _ = try await server.services.feeds.putFeed(applicationId: server.applicationId, feedId: "show", FeedInput(title: "Show"))
        let episodes = (1...3).map { number in
            EpisodeInput(
                assetId: "e\(number)", title: "Episode \(number)", downloadURL: "\(unreachableOrigin)/e\(number).mp4",
                mediaType: .file, permittedMimeTypes: ["video/mp4"], publishDate: Date(timeIntervalSince1970: 1_700_000_000),
                expiryDate: Date(timeIntervalSince1970: 4_000_000_000), expiryAfterDownloadSeconds: 86_400,
                sizeBytes: 1_000_000, customFields: ["season": .int(1), "tags": .array([.string("new")])])
        }
        _ = try await server.services.feeds.publish(applicationId: server.applicationId, feedId: "show", PublishEpisodesRequest(episodes: episodes))

        let recorder = RecordingTransport()
        var configuration = server.configuration(user: "recorded", dataDirectory: temporaryDirectory("sdk-mutated-recording"))
        configuration.transport = recorder
        let engine = BackplaneEngine(configuration: configuration)
        try await engine.start()
        guard let deviceId = await engine.status.deviceId else { throw RecordingFailed(reason: "the engine did not register") }
        _ = try await server.enqueue(.deleteAssets, device: deviceId, assetIds: ["e1"])
        _ = try await engine.sync()  // carries the command
        // Subscribed first, so that the changes answer carries the feed's episodes.
        let subscribeFirst = Route.operations.keys.sorted { lhs, rhs in
            let (lhsSubscribes, rhsSubscribes) = (lhs.hasPrefix("PUT /v1/subscriptions"), rhs.hasPrefix("PUT /v1/subscriptions"))
            return lhsSubscribes != rhsSubscribes ? lhsSubscribes : lhs < rhs
        }
        for route in subscribeFirst where !Route.operations[route]!.needsFreshEngine {
            try await Route.operations[route]!.run(engine)
        }
        // New episodes of the subscribed feed: a page of changes with something in it.
        let more = [4, 5].map { number in
            EpisodeInput(assetId: "e\(number)", title: "Episode \(number)", downloadURL: "\(unreachableOrigin)/e\(number).mp4", mediaType: .file)
        }
        _ = try await server.services.feeds.publish(applicationId: server.applicationId, feedId: "show", PublishEpisodesRequest(episodes: more))
        _ = try await server.services.feeds.retractEpisode(applicationId: server.applicationId, feedId: "show", assetId: "e2")
        try await Route.operations["GET /v1/subscriptions/changes"]!.run(engine)
        try await Route.operations[Route.unregister]!.run(engine)
        await engine.shutdown()
        return recorder.answers
    }

    private struct RecordingFailed: Error {
        var reason: String
    }

    private static func startedEngine(
        _ transport: ReplayingTransport, in directory: URL, registering: Bool = true
    ) async throws -> BackplaneEngine {
        let engine = BackplaneEngine(configuration: BackplaneClientConfiguration(
            backplaneURL: URL(string: "http://127.0.0.1:9")!, appKeyId: "ak_replayed", appKeySecret: "secret", userId: "recorded",
            dataDirectory: directory,
            // Retries come quickly, so background work that would loop on a bad answer does so here.
            sync: SyncOptions(
                interval: .seconds(3600), retry: RetryPolicy(initial: .milliseconds(10), maximum: .milliseconds(20)), useWakeUpChannel: false),
            transport: transport))
        if registering {
            try await engine.start()
        }
        return engine
    }

    // MARK: running one operation

    enum Outcome: Equatable {
        case finished, threwClientError, threw(String), timedOut

        static func == (lhs: Outcome, rhs: Outcome) -> Bool { "\(lhs)" == "\(rhs)" }
    }

    /// Runs `body`, or gives up after `limit`. Unstructured, so an operation that never returns
    /// (and ignores cancellation) is reported instead of hanging the test run.
    private static func run(
        within limit: Duration, clientError: LockedBox<String?>? = nil, _ body: @escaping @Sendable () async throws -> Void
    ) async -> Outcome {
        let (outcomes, continuation) = AsyncStream.makeStream(of: Outcome.self)
        let work = Task {
            do {
                try await body()
                continuation.yield(.finished)
            } catch let error as BackplaneClientError {
                clientError?.withLock { $0 = "\(error)" }
                continuation.yield(.threwClientError)
            } catch {
                continuation.yield(.threw("\(type(of: error)): \(error)"))
            }
        }
        let timer = Task {
            try? await Task.sleep(for: limit)
            continuation.yield(.timedOut)
        }
        var iterator = outcomes.makeAsyncIterator()
        let outcome = await iterator.next() ?? .timedOut
        timer.cancel()
        if outcome == .timedOut { work.cancel() }
        return outcome
    }
}

// MARK: - routes and the operations that read them

/// A route as "METHOD /path" with ids replaced by `*`.
enum Route {
    static let register = "POST /v1/devices/register"
    static let unregister = "POST /v1/devices/*/unregister"

    struct Operation: Sendable {
        var needsFreshEngine = false
        var run: @Sendable (BackplaneEngine) async throws -> Void
    }

    /// The public SDK call that reads each route's answer.
    static let operations: [String: Operation] = [
        register: Operation(needsFreshEngine: true) { try await $0.start() },
        unregister: Operation(needsFreshEngine: true) { try await $0.unregister() },
        "POST /v1/sync": Operation { _ = try await $0.sync() },
        "GET /v1/devices": Operation { _ = try await $0.userDevices() },
        "PATCH /v1/devices/*": Operation { _ = try await $0.setNickname("kitchen tablet") },
        "PUT /v1/devices/*/download-enabled": Operation { _ = try await $0.updateDownloadEnabled(true) },
        "POST /v1/events": Operation { engine in
            for number in 0..<3 { _ = try engine.eventLogger.log(.custom(name: "mutated-\(number)", number: Double(number))) }
            _ = try await engine.uploadEvents()
        },
        "PUT /v1/subscriptions/*": Operation { _ = try await $0.subscriptions.subscribe(feedId: "show", maxItems: 2) },
        "GET /v1/subscriptions": Operation { _ = try await $0.subscriptions.list() },
        "GET /v1/subscriptions/changes": Operation { _ = try await $0.sync() },
        "GET /v1/feeds/episodes": Operation {
            _ = try await $0.subscriptions.episodesUpdated(since: Date(timeIntervalSince1970: 0), onlySubscribed: false)
        },
    ]

    /// Error answers whose details the SDK acts on: the server's clock in a stale-timestamp
    /// refusal (the SDK corrects its own with it and retries), the counts of a device-limit
    /// refusal, and a plain refusal of an upload.
    static let errorAnswers: [(String, TransportResponse)] = [
        ("POST /v1/sync", TransportResponse(status: 401, body: Data(#"""
            {"error":{"code":"stale_timestamp","message":"The request timestamp is 400 s off the server's clock.",\#
            "details":{"serverTime":1795357091,"skewSeconds":400}}}
            """#.utf8))),
        (register, TransportResponse(status: 409, body: Data(#"""
            {"error":{"code":"device_limit_reached","message":"The user has 5 download-enabled devices.",\#
            "details":{"deviceLimit":5,"downloadEnabledCount":5,"deviceId":"d"}}}
            """#.utf8))),
        ("POST /v1/events", TransportResponse(status: 413, body: Data(#"""
            {"error":{"code":"payload_too_large","message":"At most 500 events per batch.","details":{"limit":500}}}
            """#.utf8))),
    ]

    private static let literals: Set<String> = [
        "v1", "devices", "register", "sync", "events", "subscriptions", "changes", "feeds", "episodes", "download-enabled", "unregister",
    ]

    static func of(_ request: TransportRequest) -> String {
        let segments = request.url.path.split(separator: "/").map { literals.contains(String($0)) ? String($0) : "*" }
        return "\(request.method) /" + segments.joined(separator: "/")
    }
}

/// Passes requests to a real server and keeps the fullest (longest) 2xx answer of each route.
final class RecordingTransport: Transport {
    private let inner = HTTPClientTransport()
    private let recorded = LockedBox<[String: TransportResponse]>([:])

    var answers: [String: TransportResponse] { recorded.withLock { $0 } }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let response = try await inner.send(request)
        if (200..<300).contains(response.status) {
            recorded.withLock { answers in
                let route = Route.of(request)
                if response.body.count >= answers[route]?.body.count ?? 0 { answers[route] = response }
            }
        }
        return response
    }
}

/// Answers from recorded answers, except the one route currently overridden.
final class ReplayingTransport: Transport {
    private let answers: [String: TransportResponse]
    private let overridden = LockedBox<(route: String, response: TransportResponse)?>(nil)

    init(answers: [String: TransportResponse]) {
        self.answers = answers
    }

    func override(_ route: String, with response: TransportResponse?) {
        overridden.withLock { $0 = response.map { (route, $0) } }
    }

    private let requests = LockedBox(0)
    var requestCount: Int { requests.withLock { $0 } }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        requests.withLock { $0 += 1 }
        let route = Route.of(request)
        if let overridden = overridden.withLock({ $0 }), overridden.route == route { return overridden.response }
        if let answer = answers[route] { return answer }
        return TransportResponse(status: 404, body: Data(#"{"error":{"code":"not_found","message":"No such route."}}"#.utf8))
    }
}
