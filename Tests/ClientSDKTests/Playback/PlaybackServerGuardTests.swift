@testable import ClientSDK
import Foundation
import Testing
import TestSupport

/// What another app on the device can do to the playback server, spoken to over raw sockets:
/// connections past the cap make room for a player's rather than keep it out, a connection that
/// keeps the server waiting for its request is closed (a stranger's after the head timeout, a
/// player's after the idle timeout), and a request naming another host (DNS rebinding) is
/// refused. Timeouts are set short or long per test; waits are generous, and nothing here needs
/// the machine to be fast.
@Suite struct PlaybackServerGuardTests {
    static let film = TestOrigin.content(40_000, seed: 5)

    /// An engine with `playback`'s limits and a downloaded flat asset, and the asset's URL.
    static func start(_ playback: PlaybackOptions) async throws -> (DownloadBench, URL) {
        let server = try await InProcessBackplane.start()
        let origin = try await TestOrigin.start()
        let dataDirectory = temporaryDirectory("sdk-playback-guard")
        var configuration = server.configuration(user: "dora", dataDirectory: dataDirectory)
        configuration.playback = playback
        let engine = BackplaneEngine(configuration: configuration)
        let bench = DownloadBench(server: server, origin: origin, engine: engine, events: EventRecorder(engine.events()), dataDirectory: dataDirectory)
        try await engine.start()
        origin.serve("/film.mp4", film)
        try await engine.downloads.enqueue(DownloadRequest(assetId: "film", url: origin.url("/film.mp4")))
        #expect(try await bench.waitForOutcome("film").state == .completed)
        return (bench, try await engine.playback.url(for: "film"))
    }

    /// The URL's path as sent on the wire.
    static func path(of url: URL) throws -> String {
        try #require(URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedPath)
    }

    /// A request for the first 100 bytes; `hostLines` replaces the `Host` line (several lines, or none).
    static func request(_ path: String, port: Int, hostLines: [String]? = nil, version: String = "HTTP/1.1") -> String {
        let hosts = hostLines ?? ["Host: 127.0.0.1:\(port)"]
        return "GET \(path) \(version)\r\n" + hosts.map { $0 + "\r\n" }.joined() + "Range: bytes=0-99\r\n\r\n"
    }

    /// How many of `connections` the server closes within `seconds` (the others stay silent).
    /// How many of `connections` the server closed: read in rounds of one second until `expected`
    /// are closed or `seconds` pass, then one round more, so that a close beyond those expected
    /// is counted too. A loaded machine may take long to close them; an idle one takes two rounds.
    static func closedCount(_ connections: [RawConnection], expected: Int, within seconds: TimeInterval) async -> Int {
        let deadline = Date().addingTimeInterval(seconds)
        var open = connections, closed = 0, extraRound = false
        while !open.isEmpty {
            let results = await withTaskGroup(of: (Int, Bool).self) { group in
                for (index, connection) in open.enumerated() { group.addTask { (index, await connection.read(timeout: 1) == .closed) } }
                return await group.reduce(into: [Int: Bool]()) { $0[$1.0] = $1.1 }
            }
            closed += results.values.filter { $0 }.count
            open = open.enumerated().filter { results[$0.offset] != true }.map(\.element)
            if extraRound { break }
            if closed >= expected || Date() >= deadline { extraRound = true }
        }
        return closed
    }

    /// A stranger that sends requests back to back and reads no answer gets one answer and a
    /// closed connection, not answers piling up in the server's memory.
    @Test func aStrangersConnectionIsClosedAfterItsAnswer() async throws {
        let (bench, url) = try await Self.start(PlaybackOptions(requestHeadTimeout: .seconds(300), idleTimeout: .seconds(300)))
        let port = try #require(url.port)
        let stranger = try RawConnection(port: port)
        let pipelined = String(repeating: Self.request("/guess/film.mp4", port: port), count: 50)
        #expect(await stranger.send(pipelined))
        let (data, closed) = await stranger.readUntilClosed(timeout: 15)
        #expect(closed, "the stranger's connection stayed open")
        let answers = String(decoding: data, as: UTF8.self).components(separatedBy: "HTTP/1.1 404").count - 1
        #expect(answers == 1, "\(answers) answers to a stranger's pipelined requests")
        // A player's connection is not: the token's holder keeps it.
        let player = try RawConnection(port: port)
        let path = try Self.path(of: url)
        #expect(await player.send(Self.request(path, port: port) + Self.request(path, port: port)))
        #expect(await player.readResponse(timeout: 15)?.status == 206)
        await bench.engine.shutdown()
    }

    @Test func idleConnectionsBeyondTheCapMakeRoomForAPlayerAndNeverPushOutOne() async throws {
        // Timeouts far off: whatever closes a connection here is the cap.
        let (bench, url) = try await Self.start(PlaybackOptions(maxConnections: 8, requestHeadTimeout: .seconds(300), idleTimeout: .seconds(300)))
        let port = try #require(url.port), path = try Self.path(of: url)
        let player = try RawConnection(port: port)
        #expect(await player.send(Self.request(path, port: port)))
        #expect(await player.readResponse(timeout: 15)?.status == 206)

        // Another app opens 40 connections and sends nothing. The cap holds 8: the player's and
        // the 7 newest strangers'; the 33 oldest are closed.
        var strangers: [RawConnection] = []
        for _ in 0..<40 { strangers.append(try RawConnection(port: port)) }
        #expect(await Self.closedCount(strangers, expected: 33, within: 60) == 33)
        let server = try await bench.engine.playbackServer()
        let counts = server.connections.counts
        #expect(counts.open == 8 && counts.players == 1, "\(counts)")

        // The player's idle connection was not the one closed: it is served again.
        #expect(await player.send(Self.request(path, port: port)))
        let again = await player.readResponse(timeout: 15)
        #expect(again?.status == 206 && again?.body == Self.film.prefix(100))
        // A new connection of a player's pushes out the oldest stranger instead of waiting.
        let fresh = try await PlaybackServerTests.get(url, range: "bytes=100-199")
        #expect(fresh.status == 206 && fresh.body == Self.film[100..<200])
        #expect(server.connections.counts.open <= 8)
        await bench.stop()
    }

    @Test func aConnectionThatDoesNotSendItsRequestInTimeIsClosedUnlessItIsAPlayersBetweenRequests() async throws {
        let (bench, url) = try await Self.start(PlaybackOptions(requestHeadTimeout: .seconds(1), idleTimeout: .seconds(300)))
        let port = try #require(url.port), path = try Self.path(of: url)
        // Half a head (the token's path, even), nothing at all, a stranger answered and then silent.
        let half = try RawConnection(port: port, sending: "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nRange: bytes=0-")
        let silent = try RawConnection(port: port)
        let answered = try RawConnection(port: port, sending: Self.request("/not-the-token/film/film.mp4", port: port))
        #expect(await answered.readResponse(timeout: 15)?.status == 404)
        // A head a byte every 200 ms, never finished: closed all the same (the deadline does not move).
        let trickle = try RawConnection(port: port, sending: "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nX-Trickle: ")
        let trickled = Task {
            await trickle.converse { connection in
                for _ in 0..<300 {
                    guard connection.send("x") else { return true }
                    connection.pause(.milliseconds(200))
                }
                return false
            }
        }
        // A player waits longer than the head timeout between two requests, on one connection.
        let player = try RawConnection(port: port, sending: Self.request(path, port: port))
        #expect(await player.readResponse(timeout: 15)?.status == 206)

        async let halfClosed = half.readUntilClosed(timeout: 30)
        async let silentClosed = silent.readUntilClosed(timeout: 30)
        async let answeredClosed = answered.readUntilClosed(timeout: 30)
        let (a, b, c) = await (halfClosed, silentClosed, answeredClosed)
        #expect(a.closed && a.data.isEmpty, "half a request head")
        #expect(b.closed && b.data.isEmpty, "a connection that sent nothing")
        #expect(c.closed && c.data.isEmpty, "a stranger after its answer")
        #expect(await trickled.value, "a request head sent a byte at a time")

        try await Task.sleep(for: .seconds(2))
        #expect(await player.send(Self.request(path, port: port)))
        #expect(await player.readResponse(timeout: 15)?.status == 206, "a player's connection idle past the head timeout")
        await bench.stop()
    }

    @Test func aPlayersConnectionIsClosedAfterTheIdleTimeout() async throws {
        let (bench, url) = try await Self.start(PlaybackOptions(requestHeadTimeout: .seconds(300), idleTimeout: .seconds(1)))
        let port = try #require(url.port), path = try Self.path(of: url)
        let stranger = try RawConnection(port: port)
        let player = try RawConnection(port: port, sending: Self.request(path, port: port))
        #expect(await player.readResponse(timeout: 15)?.status == 206)
        #expect(await player.readUntilClosed(timeout: 30).closed)
        // The stranger's clock is the head timeout's, minutes away.
        #expect(await stranger.read(timeout: 1) == .timedOut)
        await bench.stop()
    }

    @Test func aRequestNamingAnotherHostIsRefusedBeforeItsPath() async throws {
        let (bench, url) = try await Self.start(PlaybackOptions())
        let port = try #require(url.port), path = try Self.path(of: url)
        // A page that rebound its own name to 127.0.0.1 sends that name, with the token's path or not.
        var refused: [RawConnection] = []
        for (hostLines, status) in [
            (["Host: attacker.example:\(port)"], 421), (["Host: attacker.example"], 421), (["Host: 127.0.0.1:\(port + 1)"], 421),
            (["Host: 127.0.0.1.attacker.example:\(port)"], 421), (["Host: localhost:\(port)0"], 421), (["Host: 127.0.0.1:+\(port)"], 421),
            ([], 400), (["Host: 127.0.0.1:\(port)", "Host: attacker.example"], 400),
        ] {
            let connection = try RawConnection(port: port, sending: Self.request(path, port: port, hostLines: hostLines))
            let answer = await connection.readResponse(timeout: 15)
            #expect(answer?.status == status, "\(hostLines)")
            #expect(answer?.body.isEmpty == false && answer?.headers["content-type"]?.hasPrefix("text/plain") == true, "\(hostLines)")
            refused.append(connection)
        }
        let wrongPath = try RawConnection(port: port, sending: Self.request("/not-the-token/x", port: port, hostLines: ["Host: attacker.example"]))
        #expect(await wrongPath.readResponse(timeout: 15)?.status == 421)
        // Holding the token's path under another host does not make a connection a player's.
        #expect(try await bench.engine.playbackServer().connections.counts.players == 0)

        for (hostLines, version) in [
            (["Host: 127.0.0.1:\(port)"], "HTTP/1.1"), (["Host: localhost:\(port)"], "HTTP/1.1"), (["Host: LocalHost:\(port)"], "HTTP/1.1"),
            (["Host: 127.0.0.1"], "HTTP/1.1"), ([], "HTTP/1.0"),
        ] {
            let connection = try RawConnection(port: port, sending: Self.request(path, port: port, hostLines: hostLines, version: version))
            let answer = await connection.readResponse(timeout: 15)
            #expect(answer?.status == 206 && answer?.body == Self.film.prefix(100), "\(hostLines) \(version)")
        }
        await bench.stop()
    }
}
