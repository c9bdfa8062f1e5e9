import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// A real HTTP origin for download tests: serves generated files with `Range`, `If-Range`,
/// `ETag` and `Content-Type` as a CDN does, injects faults per path, and counts what it served.
final class TestOrigin: Sendable {
    enum Fault: Sendable {
        /// Answer `status` to the first `times` requests.
        case failFirst(Int, status: Int)
        /// Send only `bytes` bytes of the body, then drop the connection, the first `times` times.
        case dropAfter(bytes: Int, times: Int)
        /// Answer every request in full, as an origin without range support does.
        case ignoreRange
        /// Honour `Range` but not `If-Range`, as an origin that keeps no validators does.
        case ignoreIfRange
        /// Wait this long before answering, every time (a slow origin).
        case delay(Duration)
        /// Hold the first request until the path is asked a second time (or `timeout` passes),
        /// then answer both: two clients are sure to reach the origin for it, whichever comes
        /// first and however slow the machine, with no fixed wait.
        case holdUntilAskedAgain(timeout: Duration)
    }

    private struct File {
        var bytes: Data
        var contentType: String
        var version = 1
        var etag: String { "\"v\(version)-\(bytes.count)\"" }
    }

    private struct State {
        var files: [String: File] = [:]
        var faults: [String: Fault] = [:]
        var requests: [String: Int] = [:]
        /// Requests that arrived, before any wait (`holdUntilAskedAgain`).
        var arrivals: [String: Int] = [:]
        var bytesServed: [String: Int] = [:]
        /// `HEAD` requests, counted apart: they send no bytes.
        var heads: [String: Int] = [:]
        /// Asked before every `GET` with its path and query: a status to answer instead.
        var gate: (@Sendable (_ path: String, _ query: String?) -> Int?)?
        /// Bytes per second each answer's body is sent at (nil: as fast as it goes).
        var throttle: Int?
        /// `GET`s between their arrival and their answer's head.
        var inFlight = 0
        /// Each `GET` in order of arrival: its path and the `GET`s in flight with it (itself included).
        var arrivalsInFlight: [(path: String, inFlight: Int)] = []
        /// Each `GET` in order of arrival: its path, query and headers.
        var asked: [(path: String, query: String?, headers: HTTPFields)] = []
    }

    private let state = LockedBox(State())
    private let task = LockedBox<Task<Void, any Error>?>(nil)
    private let boundPort = LockedBox(0)

    var port: Int { boundPort.withLock { $0 } }

    static func start() async throws -> TestOrigin {
        let origin = TestOrigin()
        let router = Router()
        router.get("**") { request, _ in await origin.answer(request) }
        router.head("**") { request, _ in origin.answerHead(request) }
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) }, logger: Logger(label: "test-origin", factory: { _ in SwiftLogNoOpLogHandler() }))
        origin.task.withLock { $0 = Task { try await app.runService(gracefulShutdownSignals: []) } }
        var iterator = ports.makeAsyncIterator()
        let port = await iterator.next() ?? 0
        origin.boundPort.withLock { $0 = port }
        return origin
    }

    func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    /// Stops serving. Waits up to two seconds for the graceful shutdown, which waits for open
    /// requests: a test that left a response unread (a cancelled download) must not hang on it.
    func stop() async {
        guard let running = task.withLock({ $0 }) else { return }
        running.cancel()
        // Not a task group racing a sleep: the group would wait for the stuck shutdown too.
        let stopped = LockedBox(false)
        Task { _ = try? await running.value; stopped.withLock { $0 = true } }
        for _ in 0..<40 where !stopped.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(50)) }
    }

    /// Serves `bytes` at `path` from now on; a file served before becomes a new version (new ETag).
    func serve(_ path: String, _ bytes: Data, contentType: String = "video/mp4") {
        state.withLock { state in
            let version = (state.files[path]?.version ?? 0) + 1
            state.files[path] = File(bytes: bytes, contentType: contentType, version: version)
        }
    }

    func inject(_ fault: Fault?, at path: String) {
        state.withLock { $0.faults[path] = fault }
    }

    /// The bytes served at `path` now.
    func bytes(at path: String) -> Data? { state.withLock { $0.files[path]?.bytes } }
    func requests(_ path: String) -> Int { state.withLock { $0.requests[path] ?? 0 } }
    /// Requests per path, for every path under `prefix`.
    func requests(under prefix: String) -> [String: Int] { state.withLock { $0.requests.filter { $0.key.hasPrefix(prefix) } } }
    func bytesServed(under prefix: String) -> Int {
        state.withLock { $0.bytesServed.filter { $0.key.hasPrefix(prefix) }.values.reduce(0, +) }
    }
    func bytesServed(_ path: String) -> Int { state.withLock { $0.bytesServed[path] ?? 0 } }
    /// Answers `GET`s the status `gate` gives (nil: as usual), e.g. a CDN refusing expired tokens.
    func setGate(_ gate: (@Sendable (_ path: String, _ query: String?) -> Int?)?) {
        state.withLock { $0.gate = gate }
    }

    /// Sends every answer's body at `bytesPerSecond` from now on (nil: at full speed), counting
    /// its bytes as they are sent: a client that goes away mid-body was served what it got.
    func throttle(bytesPerSecond: Int?) {
        state.withLock { $0.throttle = bytesPerSecond }
    }

    /// For each `GET` under `prefix`, in order of arrival, how many `GET`s were in flight with it
    /// (itself included): the client's concurrency as the origin sees it.
    func inFlightAtArrivals(under prefix: String) -> [Int] {
        state.withLock { $0.arrivalsInFlight.filter { $0.path.hasPrefix(prefix) }.map(\.inFlight) }
    }

    /// The `GET`s under `prefix` as they came, in order of arrival: path, query and headers.
    func asked(under prefix: String) -> [(path: String, query: String?, headers: HTTPFields)] {
        state.withLock { $0.asked.filter { $0.path.hasPrefix(prefix) } }
    }

    /// Paths of the `GET`s under `prefix`, in order of arrival.
    func arrivalOrder(under prefix: String) -> [String] {
        state.withLock { $0.arrivalsInFlight.filter { $0.path.hasPrefix(prefix) }.map(\.path) }
    }

    func heads(under prefix: String) -> Int { state.withLock { $0.heads.filter { $0.key.hasPrefix(prefix) }.values.reduce(0, +) } }

    /// Deterministic bytes that differ at every offset a test may resume from.
    static func content(_ count: Int, seed: UInt8 = 1) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed) &+ $0 >> 8) })
    }

    /// A file's headers without its body (faults are for the downloads' `GET`s).
    private func answerHead(_ request: Request) -> Response {
        let path = request.uri.path
        let file = state.withLock { state -> File? in
            state.heads[path, default: 0] += 1
            return state.files[path]
        }
        guard let file else { return Response(status: .notFound) }
        return Response(status: .ok, headers: [
            .contentType: file.contentType, .eTag: file.etag, .acceptRanges: "bytes", .contentLength: String(file.bytes.count),
        ])
    }

    private func answer(_ request: Request) async -> Response {
        let path = request.uri.path
        let (fault, arrival) = state.withLock { state in
            state.arrivals[path, default: 0] += 1
            state.inFlight += 1
            state.arrivalsInFlight.append((path, state.inFlight))
            state.asked.append((path, request.uri.query, request.headers))
            return (state.faults[path], state.arrivals[path]!)
        }
        defer { state.withLock { $0.inFlight -= 1 } }
        switch fault {
        case .delay(let duration)?:
            try? await Task.sleep(for: duration)
        case .holdUntilAskedAgain(let timeout)? where arrival == 1:
            let deadline = ContinuousClock.now + timeout
            while state.withLock({ $0.arrivals[path, default: 0] }) < 2, ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(10))
            }
        default:
            break
        }
        return respond(request)
    }

    private func respond(_ request: Request) -> Response {
        let path = request.uri.path
        let (file, fault, attempt, gate, throttle) = state.withLock { state in
            state.requests[path, default: 0] += 1
            return (state.files[path], state.faults[path], state.requests[path]!, state.gate, state.throttle)
        }
        if let status = gate?(path, request.uri.query) { return Response(status: .init(code: status)) }
        guard let file else { return Response(status: .notFound) }
        if case .failFirst(let times, let status) = fault, attempt <= times {
            return Response(status: .init(code: status))
        }
        var headers: HTTPFields = [.contentType: file.contentType, .eTag: file.etag, .acceptRanges: "bytes"]
        var status = HTTPResponse.Status.ok
        var body = file.bytes[...]
        let ignoresRange: Bool = if case .ignoreRange = fault { true } else { false }
        let ignoresValidator: Bool = if case .ignoreIfRange = fault { true } else { false }
        if !ignoresRange, let range = request.headers[.range].flatMap({ Self.range($0, count: file.bytes.count) }),
            ignoresValidator || request.headers[.ifRange].map({ $0 == file.etag }) ?? true
        {
            status = .partialContent
            body = file.bytes[range]
            headers[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(file.bytes.count)"
        }
        headers[.contentLength] = String(body.count)
        let sent: Data = if case .dropAfter(let bytes, let times) = fault, attempt <= times { Data(body.prefix(bytes)) } else { Data(body) }
        let dropped = sent.count < body.count
        if let throttle {
            return Response(status: status, headers: headers, body: ResponseBody { [state] writer in
                try await Self.write(sent, to: &writer, bytesPerSecond: throttle) { count in
                    state.withLock { $0.bytesServed[path, default: 0] += count }
                }
                if dropped { throw CancellationError() }
                try await writer.finish(nil)
            })
        }
        state.withLock { $0.bytesServed[path, default: 0] += sent.count }
        return Response(status: status, headers: headers, body: ResponseBody { writer in
            try await writer.write(ByteBuffer(bytes: sent))
            if dropped { throw CancellationError() }
            try await writer.finish(nil)
        })
    }

    /// Writes `bytes` in 16 KiB pieces paced to `bytesPerSecond`, calling `sent` after each.
    private static func write(
        _ bytes: Data, to writer: inout some ResponseBodyWriter, bytesPerSecond: Int, sent: (Int) -> Void
    ) async throws {
        let started = ContinuousClock.now
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + 16 * 1024, bytes.count)
            try await writer.write(ByteBuffer(bytes: bytes[offset..<end]))
            sent(end - offset)
            offset = end
            try await Task.sleep(until: started + .seconds(Double(offset) / Double(bytesPerSecond)), clock: .continuous)
        }
    }

    /// One `bytes=a-b` or `bytes=a-` range inside a file of `count` bytes.
    private static func range(_ value: String, count: Int) -> Range<Int>? {
        guard value.hasPrefix("bytes=") else { return nil }
        let bounds = value.dropFirst("bytes=".count).split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let start = Int(bounds[0]), start < count else { return nil }
        let end = bounds[1].isEmpty ? count - 1 : min(Int(bounds[1]) ?? count - 1, count - 1)
        return end >= start ? start..<(end + 1) : nil
    }
}
