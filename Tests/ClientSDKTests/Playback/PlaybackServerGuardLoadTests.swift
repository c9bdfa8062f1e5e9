import ClientSDK
import Foundation
import Synchronization
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The playback server under another app's flood, as a phone runs it: `backplane-harness play
/// --serve` in a process of its own under a phone's descriptor limit (1,024), and the flood from
/// this process: 1,100 connections that send nothing and 200 that send a request head a byte at
/// a time. A player's request is answered within 2 s all the same; without the cap the server
/// ran out of descriptors and the player's connection was never accepted.
@Suite(.serialized, .enabled(if: FaultTests.requested, Comment(rawValue: FaultTests.skipReason))) struct PlaybackServerGuardLoadTests {
    static let idle = 1_100, trickling = 200

    @Test func aPlayerIsServedWithinTwoSecondsWhileAnotherAppFloodsTheServer() async throws {
        let root = temporaryDirectory("playback-guard-flood")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await HarnessEndToEndTests.ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        // A real video when ffmpeg is there, for ffprobe to play through the flood.
        let players = PlaybackPlayersTests.playersInstalled
        let film = players ? try await Self.makeVideo(in: root) : TestOrigin.content(300_000, seed: 3)
        origin.serve("/film.mp4", film)
        let harness = try backplane.harness(user: "viewer")
        let downloaded = try await harness.run(
            ["download", "--asset-id", "film", "--url", origin.url("/film.mp4").absoluteString, "--wait"], device: "phone")
        #expect(downloaded.status == 0, "\(downloaded.json)")

        let (serving, url, _) = try await Self.serve(harness, root: root, descriptors: 1_024)
        defer { serving.terminate() }
        let port = try #require(url.port)

        try ConnectionFlood.raiseDescriptorLimit(to: 2 * (Self.idle + Self.trickling) + 1_024)
        try await ConnectionFlood.with(port: port, idle: Self.idle, trickling: Self.trickling) { flood in
            // The flood is in before the player comes: its connections are open on this side.
            try await Task.sleep(for: .seconds(1))
            // Timed on a thread of its own, from before the connection to the end of the answer:
            // what the server takes, not how late this process's task pool resumes a task.
            let path = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedPath)
            let started = ContinuousClock.now
            let player = try RawConnection(port: port, sending: "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nRange: bytes=0-999\r\n\r\n")
            let (status, body, took) = await player.converse { connection in
                let answer = connection.readResponse(timeout: 15)
                return (answer?.status, answer?.body, ContinuousClock.now - started)
            }
            #expect(status == 206 && body == film.prefix(1_000))
            #expect(took < .seconds(2), "the player's request took \(took) under the flood")
            // And through async-http-client, as the other playback tests ask.
            let answer = try await PlaybackServerTests.get(url, range: "bytes=1000-1999")
            #expect(answer.status == 206 && answer.body == film[1_000..<2_000])
            if players {
                let frames = try await PlaybackPlayersTests.countFrames(url)
                #expect(frames == Self.frames, "ffprobe through \(url) under the flood")
            }
            // The server kept only its cap of the flood open (less the player's), whatever this side holds.
            let cap = PlaybackOptions().maxConnections
            let deadline = ContinuousClock.now + .seconds(30)
            var open = flood.stillOpen()
            while open > cap, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(200))
                open = flood.stillOpen()
            }
            #expect(open <= cap, "the server holds \(open) of the flood's \(Self.idle + Self.trickling) connections")
            print("playback flood: a player answered in \(took) with \(Self.idle + Self.trickling) connections flooding, \(open) of them held")
        }
        serving.signal(SIGTERM)
        #expect(try await serving.waitForExit(timeout: .seconds(30)) == 0, "\(serving.output)")
    }

    /// A serving process that runs out of descriptors before the cap (its own, plus 16) keeps
    /// failing to `accept` while the flood waits in the backlog: it must wait that out, not spin.
    /// Its CPU time is read from `/proc` (Linux; elsewhere the test does not run).
    @Test func aServerOutOfDescriptorsBacksOffInsteadOfSpinningOnAccept() async throws {
        guard FileManager.default.fileExists(atPath: "/proc/self/stat") else { return }
        let root = temporaryDirectory("playback-guard-emfile")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await HarnessEndToEndTests.ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        let origin = try await TestOrigin.start()
        defer { Task { await origin.stop() } }
        origin.serve("/film.mp4", TestOrigin.content(10_000, seed: 4))
        let harness = try backplane.harness(user: "viewer")
        let downloaded = try await harness.run(
            ["download", "--asset-id", "film", "--url", origin.url("/film.mp4").absoluteString, "--wait"], device: "phone")
        #expect(downloaded.status == 0, "\(downloaded.json)")
        backplane.process.terminate()

        // What the serving process holds of its own, then a limit 16 above it.
        let (first, _, firstPid) = try await Self.serve(harness, root: root, descriptors: 1_024)
        let own = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(firstPid)/fd").count
        first.signal(SIGTERM)
        _ = try await first.waitForExit(timeout: .seconds(30))
        let (serving, url, pid) = try await Self.serve(harness, root: root, descriptors: own + 16)
        defer { serving.terminate() }

        try await ConnectionFlood.with(port: try #require(url.port), idle: 200, trickling: 0) { _ in
            try await Task.sleep(for: .seconds(1))
            let before = try Self.cpuTime(pid)
            let started = ContinuousClock.now
            try await Task.sleep(for: .seconds(3))
            let used = try Self.cpuTime(pid) - before, elapsed = ContinuousClock.now - started
            // Spinning takes a whole core; backing off, a few accepts a second take next to nothing.
            #expect(used < elapsed / 3, "the serving process used \(used) of CPU in \(elapsed) out of descriptors (\(own) + 16)")
            print("playback EMFILE: \(used) of CPU in \(elapsed) with \(own) + 16 descriptors and 200 connections waiting")
        }
    }

    /// `play film --serve` under `ulimit -n descriptors`: the process, the URL it printed, its pid.
    static func serve(_ harness: HarnessEndToEndTests.Harness, root: URL, descriptors: Int) async throws -> (ChildProcess, URL, Int) {
        let serving = try ChildProcess(URL(fileURLWithPath: "/bin/sh"), [
            "-c", "ulimit -n \(descriptors) && echo \"serving pid $$\" && exec \"$0\" \"$@\"", harness.binary.path,
            "play", "film", "--serve", "--data-dir", root.appendingPathComponent("phone").path,
        ], environment: harness.environment)
        do {
            let output = try await serving.waitForOutput(containing: "\"url\"", timeout: .seconds(60))
            let lines = output.split(separator: "\n")
            let line = try #require(lines.first { $0.contains("\"url\"") })
            let json = try JSONDecoder().decode([String: JSONValue].self, from: Data(line.utf8))
            let url = try #require(json["url"]?.stringValue.flatMap(URL.init(string:)), "\(line)")
            let pid = try #require(lines.first { $0.hasPrefix("serving pid ") }.flatMap { Int($0.dropFirst("serving pid ".count)) })
            return (serving, url, pid)
        } catch {
            serving.terminate()
            throw error
        }
    }

    /// User and system CPU time of a process, from `/proc/<pid>/stat`.
    static func cpuTime(_ pid: Int) throws -> Duration {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // Fields after the command's closing parenthesis, from the third (state): utime and stime are the 14th and 15th.
        let fields = try #require(stat.split(separator: ")").last).split(separator: " ")
        let ticks = try #require(Int(fields[11])) + (try #require(Int(fields[12])))
        return .milliseconds(ticks * 1_000 / sysconf(Int32(_SC_CLK_TCK)))
    }

    /// 2 s of video at 25 frames per second, an MP4 made by ffmpeg.
    static let frames = 50

    static func makeVideo(in root: URL) async throws -> Data {
        let file = root.appendingPathComponent("film.mp4")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let made = try await ChildProcess.run(PlaybackPlayersTests.ffmpeg, [
            "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=25", "-t", "2", "-c:v", "libx264", "-preset", "ultrafast",
            "-movflags", "+faststart", file.path,
        ], timeout: .seconds(120))
        try #require(made.status == 0, "ffmpeg: \(made.output)")
        return try Data(contentsOf: file)
    }
}

/// Another app's connections to a port: `idle` ones that send nothing and `trickling` ones that
/// send a request head a byte every 250 ms and never finish it. Non-blocking sockets, so a server
/// that stops accepting does not stall the flood; one thread trickles, and closes every socket
/// once stopped (no descriptor is closed while that thread may still write to it).
final class ConnectionFlood: Sendable {
    private let descriptors: [Int32]
    private let trickling: [Int32]
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    /// Runs `body` with a flood on `port`, and stops it however `body` ends.
    static func with<T: Sendable>(port: Int, idle: Int, trickling: Int, _ body: (ConnectionFlood) async throws -> T) async throws -> T {
        let flood = try ConnectionFlood(port: port, idle: idle, trickling: trickling)
        do {
            let result = try await body(flood)
            await flood.stop()
            return result
        } catch {
            await flood.stop()
            throw error
        }
    }

    /// Connects in batches, each given up to 10 s to be established before the next: a burst
    /// past the listen backlog would have its connections' SYNs dropped and retried for a minute,
    /// landing on the server whenever (a player's connection with them).
    private init(port: Int, idle: Int, trickling: Int) throws {
        var opened: [Int32] = []
        while opened.count < idle + trickling {
            var batch: [Int32] = []
            do {
                for _ in 0..<min(100, idle + trickling - opened.count) { batch.append(try Self.openConnection(port: port)) }
            } catch {
                (opened + batch).forEach { _ = close($0) }
                throw error
            }
            Self.waitUntilConnected(batch, for: 10)
            opened += batch
        }
        descriptors = opened
        self.trickling = Array(opened.suffix(trickling))
        Thread { [self] in trickle() }.start()
    }

    private func trickle() {
        let head = Array("GET /flood HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Trickle: ".utf8)
        var sent = [Int](repeating: 0, count: trickling.count)
        while !stopped.load(ordering: .acquiring) {
            for (index, descriptor) in trickling.enumerated() {
                var byte = sent[index] < head.count ? head[sent[index]] : UInt8(ascii: "x")
                if Self.sendWithoutSignal(descriptor, &byte) { sent[index] += 1 }
            }
            usleep(250_000)
        }
        descriptors.forEach { _ = close($0) }
        finished.signal()
    }

    func stop() async {
        stopped.store(true, ordering: .releasing)
        let finished = finished
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                finished.wait()
                continuation.resume()
            }
        }
    }

    /// How many of the flood's connections are established and not closed by the server (an end
    /// of stream or a reset): the ones it holds, or has not accepted yet.
    func stillOpen() -> Int {
        var polled = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN | POLLOUT), revents: 0) }
        guard poll(&polled, nfds_t(polled.count), 0) >= 0 else { return -1 }
        return polled.filter { entry in
            guard entry.revents & Int16(POLLERR | POLLHUP) == 0, entry.revents & Int16(POLLOUT) != 0 else { return false }
            guard entry.revents & Int16(POLLIN) != 0 else { return true }
            var byte: UInt8 = 0
            return recv(entry.fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) > 0
        }.count
    }

    private static func waitUntilConnected(_ batch: [Int32], for seconds: Double) {
        let deadline = Date().addingTimeInterval(seconds)
        var pending = batch
        while !pending.isEmpty, Date() < deadline {
            var polled = pending.map { pollfd(fd: $0, events: Int16(POLLOUT), revents: 0) }
            _ = poll(&polled, nfds_t(polled.count), 100)
            pending = polled.filter { $0.revents == 0 }.map(\.fd)
        }
    }

    /// Raises this process's soft limit on descriptors to `count` when it is lower and the hard
    /// limit allows (both ends of every flood connection may be in this process's table).
    static func raiseDescriptorLimit(to count: Int) throws {
        var limit = rlimit()
        #if canImport(Glibc)
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limit) == 0 else { throw POSIXError(.EPERM) }
        guard limit.rlim_cur < rlim_t(count) else { return }
        limit.rlim_cur = min(rlim_t(count), limit.rlim_max)
        guard setrlimit(resource, &limit) == 0 else { throw POSIXError(.EPERM) }
    }

    private static func openConnection(port: Int) throws -> Int32 {
        #if canImport(Glibc)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        #if canImport(Darwin)
        var one: Int32 = 1
        _ = setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 || errno == EINPROGRESS else {
            let code = errno
            _ = close(descriptor)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .ECONNREFUSED)
        }
        return descriptor
    }

    private static func sendWithoutSignal(_ descriptor: Int32, _ byte: inout UInt8) -> Bool {
        #if canImport(Glibc)
        Glibc.send(descriptor, &byte, 1, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) == 1
        #else
        Darwin.send(descriptor, &byte, 1, MSG_DONTWAIT) == 1
        #endif
    }
}
