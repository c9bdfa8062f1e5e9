import Backplane
import Foundation
import Synchronization
import BackplaneWire
import Testing
import TestSupport

/// The wake-up channel's own protocol, frame by frame over a real port: pings, closing from
/// either side, and shutdown. (What wakes a channel is tested with the services that do it.)
@Suite struct WakeUpChannelTests {
    @Test func theServerPingsAndClosesAChannelThatStopsAnswering() async throws {
        let fixture = try await Fixture.make()
        // A pong counts if it arrives before the next ping: an interval long enough for a loaded
        // machine (the whole suite on two cores, where 4 s once did not do) to read and answer
        // within it; one answered ping shows as much as several.
        try await RealPort.serve(fixture, channelPingInterval: .seconds(8)) { port, _ in
            let phone = try await RealPort.register(fixture, port: port, device: "phone")
            let frames = FrameReader(try await RealPort.openChannel(fixture, port: port, as: phone))
            // An answered ping keeps the channel open.
            let ping = try #require(await frames.next(), "the channel closed while its pings were answered")
            #expect(ping.opcode == 0x9)
            #expect(await frames.connection.send(WebSocketBytes.masked(opcode: 0xA, ping.payload)))
            #expect(fixture.services.wakeUpHub.channelCount == 1)
            // A ping left unanswered: at the next one the server says "going away" and hangs up.
            #expect(await frames.next()?.opcode == 0x9)
            try await Self.expectClosed(frames, code: 1001)
            try await Self.waitUntilNoChannel(fixture)
        }
    }

    @Test func aDevicesCloseFrameIsEchoedAndItsChannelLeavesTheHub() async throws {
        let fixture = try await Fixture.make()
        try await RealPort.serve(fixture) { port, _ in
            let phone = try await RealPort.register(fixture, port: port, device: "phone")
            let frames = FrameReader(try await RealPort.openChannel(fixture, port: port, as: phone))
            #expect(fixture.services.wakeUpHub.channelCount == 1)
            // The device's own ping is answered with its payload first.
            #expect(await frames.connection.send(WebSocketBytes.masked(opcode: 0x9, Data("hi".utf8))))
            let pong = try #require(await frames.next())
            #expect(pong.opcode == 0xA && pong.payload == Data("hi".utf8))
            #expect(await frames.connection.send(WebSocketBytes.masked(opcode: 0x8, Data([0x03, 0xE8]))))  // 1000
            try await Self.expectClosed(frames, code: 1000)
            try await Self.waitUntilNoChannel(fixture)
            // A code no endpoint may send (1005 means "none was given") is answered 1002.
            let again = FrameReader(try await RealPort.openChannel(fixture, port: port, as: phone))
            #expect(await again.connection.send(WebSocketBytes.masked(opcode: 0x8, Data([0x03, 0xED]))))
            try await Self.expectClosed(again, code: 1002)
        }
    }

    @Test func aFrameOverTheLimitClosesTheChannelWith1009() async throws {
        let fixture = try await Fixture.make()
        try await RealPort.serve(fixture) { port, _ in
            let phone = try await RealPort.register(fixture, port: port, device: "phone")
            let frames = FrameReader(try await RealPort.openChannel(fixture, port: port, as: phone))
            // Up to 1,024 bytes is read and dropped; the channel stays open.
            #expect(await frames.connection.send(WebSocketBytes.masked(opcode: 0x1, Data(repeating: 0x61, count: 1024))))
            #expect(await frames.connection.send(WebSocketBytes.masked(opcode: 0x9)))
            #expect(await frames.next()?.opcode == 0xA)
            #expect(await frames.connection.send(WebSocketBytes.masked(opcode: 0x1, Data(repeating: 0x61, count: 1025))))
            try await Self.expectClosed(frames, code: 1009)
            try await Self.waitUntilNoChannel(fixture)
        }
    }

    @Test func aDeviceThatHangsUpWithoutACloseFrameLeavesTheHub() async throws {
        let fixture = try await Fixture.make()
        try await RealPort.serve(fixture) { port, _ in
            let phone = try await RealPort.register(fixture, port: port, device: "phone")
            let channel = try await RealPort.openChannel(fixture, port: port, as: phone)
            #expect(fixture.services.wakeUpHub.channelCount == 1)
            channel.disconnect()
            try await Self.waitUntilNoChannel(fixture)
        }
    }

    @Test func shuttingDownTellsEveryChannelTheServerIsGoingAway() async throws {
        let fixture = try await Fixture.make()
        try await RealPort.serve(fixture) { port, stopping in
            let phone = try await RealPort.register(fixture, port: port, device: "phone")
            let tablet = try await RealPort.register(fixture, port: port, device: "tablet")
            let channels = [
                FrameReader(try await RealPort.openChannel(fixture, port: port, as: phone)),
                FrameReader(try await RealPort.openChannel(fixture, port: port, as: tablet)),
            ]
            stopping.shutDownGracefully()
            for frames in channels { try await Self.expectClosed(frames, code: 1001) }
        }
    }

    @Test func aCancelledServerClosesItsChannelsToo() async throws {
        let fixture = try await Fixture.make()
        try await RealPort.serve(fixture) { port, stopping in
            let phone = try await RealPort.register(fixture, port: port, device: "phone")
            let frames = FrameReader(try await RealPort.openChannel(fixture, port: port, as: phone))
            // No graceful shutdown: the channel holds no task that cancellation would end.
            stopping.cancel()
            try await Self.expectClosed(frames, code: 1001)
        }
    }

    @Test func aChannelThatRegistersAfterTheServerStoppedIsClosedAtOnce() {
        let hub = WakeUpHub()
        let early = ClosingProbe(), late = ClosingProbe()
        _ = hub.register(early, applicationId: "app", deviceId: "a")
        #expect(!early.closed)
        hub.closeAll()
        #expect(early.closed)
        // Its upgrade completed while the server was stopping.
        _ = hub.register(late, applicationId: "app", deviceId: "b")
        #expect(late.closed)
    }

    /// The server's close frame with `code`, then the end of the connection.
    private static func expectClosed(_ frames: FrameReader, code: UInt16) async throws {
        let close = try #require(await frames.next(), "the connection ended without a close frame")
        #expect(close.opcode == 0x8)
        #expect(close.payload == Data([UInt8(code >> 8), UInt8(code & 0xFF)]), "close code")
        #expect(await frames.next() == nil)
        #expect(frames.ended == .closed, "the connection stayed open after the close frame")
    }

    private static func waitUntilNoChannel(_ fixture: Fixture) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while fixture.services.wakeUpHub.channelCount > 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(fixture.services.wakeUpHub.channelCount == 0, "the hub still holds a channel that has ended")
    }
}

/// Splits what the server sends on a channel into frames (unmasked, payloads under 126 bytes).
final class FrameReader: @unchecked Sendable {
    struct Frame: Equatable {
        var opcode: UInt8
        var payload: Data
    }

    let connection: RawConnection
    /// Why `next()` last returned nil: the connection closed, or it stayed silent for 15 s.
    private(set) var ended: RawConnection.ReadResult?
    private var buffered = Data()

    init(_ connection: RawConnection) {
        self.connection = connection
    }

    /// The next frame, or nil once the connection has closed (or stays silent for 15 s).
    func next() async -> Frame? {
        while true {
            if buffered.count >= 2 {
                let bytes = [UInt8](buffered.prefix(2))
                let length = Int(bytes[1] & 0x7F)
                if buffered.count >= 2 + length {
                    let frame = Frame(opcode: bytes[0] & 0x0F, payload: Data(buffered.dropFirst(2).prefix(length)))
                    buffered = Data(buffered.dropFirst(2 + length))
                    return frame
                }
            }
            let read = await connection.read(timeout: 15)
            guard case .data(let more) = read else {
                ended = read
                return nil
            }
            buffered += more
        }
    }
}

/// A hub channel that notes whether it was closed.
final class ClosingProbe: WakeUpChannel {
    private let state = Mutex(false)
    var closed: Bool { state.withLock { $0 } }
    func wake() {}
    func close() { state.withLock { $0 = true } }
}
