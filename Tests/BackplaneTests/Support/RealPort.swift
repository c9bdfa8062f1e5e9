import Backplane
import Foundation
import Hummingbird
import BackplaneWire
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing
import TestSupport

/// A fixture served on a real port, for tests that speak raw HTTP and WebSocket frames.
enum RealPort {
    /// How a test stops the server it is served by.
    struct Stopping: Sendable {
        let gracefulShutdown: GracefulShutdownTestTrigger
        let task: Task<Void, any Error>

        /// As SIGTERM would.
        func shutDownGracefully() { gracefulShutdown.triggerGracefulShutdown() }
        /// As a service group that gives up would.
        func cancel() { task.cancel() }
    }

    /// Serves `fixture` on a free port while `body` runs; `body` may stop the server.
    static func serve(
        _ fixture: Fixture, limits: TransportLimits = TransportLimits(), channelPingInterval: Duration? = .seconds(60),
        rateLimits: RateLimits = RateLimits(), _ body: @escaping @Sendable (_ port: Int, _ stopping: Stopping) async throws -> Void
    ) async throws {
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        try await testGracefulShutdown { trigger in
            let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
            let app = buildApplication(
                BackplaneConfiguration(
                    port: 0, dataDirectory: fixture.directory, logLevel: .critical, channelPingInterval: channelPingInterval,
                    transport: limits, rateLimits: rateLimits),
                services: fixture.services, onServerRunning: { continuation.yield($0) })
            let server = Task { try await app.runService(gracefulShutdownSignals: []) }
            defer { server.cancel() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            try await body(port, Stopping(gracefulShutdown: trigger, task: server))
        }
    }

    static func serve(_ fixture: Fixture, limits: TransportLimits, _ body: @escaping @Sendable (_ port: Int) async throws -> Void) async throws {
        try await serve(fixture, limits: limits) { port, _ in try await body(port) }
    }

    /// Registers a device over the real port, as the install holding its device key.
    static func register(_ fixture: Fixture, port: Int, device: String) async throws -> DeviceIdentity {
        let key = fixture.deviceKeys.key(for: device)
        let body = try Client.encode(RegisterDeviceRequest(
            userId: "alice", deviceId: device, platform: "linux", devicePublicKey: DeviceKeys.publicKey(key)))
        let headers = fixture.signer.headers(method: .post, path: "/v1/devices/register", body: body, proofKey: key)
        var request = "POST /v1/devices/register HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.count)\r\n"
        for field in headers { request += "\(field.name.rawName): \(field.value)\r\n" }
        let connection = try RawConnection(port: port, sending: Data((request + "\r\n").utf8) + body)
        let response = try #require(await connection.readResponse(timeout: 15))
        let registered = try WireJSON.decoder().decode(RegisterDeviceResponse.self, from: response.body)
        return DeviceIdentity(deviceId: device, credential: registered.deviceCredential)
    }

    /// A hand-made WebSocket upgrade for a device's channel, signed as `identity` would sign it.
    static func channelUpgrade(_ fixture: Fixture, deviceId: String, as identity: DeviceIdentity?, signer: Signer? = nil) -> String {
        let path = "/v1/devices/\(deviceId)/channel"
        let headers = (signer ?? fixture.signer).headers(
            method: .get, path: path, body: Data(), deviceId: identity?.deviceId, credential: identity?.credential)
        var request = "GET \(path) HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        for field in headers where field.name != .contentType { request += "\(field.name.rawName): \(field.value)\r\n" }
        return request + "\r\n"
    }

    /// Opens `device`'s channel and reads past the 101 and the first wake-up (`sync`).
    static func openChannel(_ fixture: Fixture, port: Int, as device: DeviceIdentity) async throws -> RawConnection {
        let channel = try RawConnection(port: port, sending: channelUpgrade(fixture, deviceId: device.deviceId, as: device))
        let switched = try #require(await channel.readResponse(timeout: 15))
        #expect(switched.status == 101)
        var first = switched.body
        while first.count < 6, case .data(let more) = await channel.read(timeout: 15) { first += more }
        #expect(first.prefix(6) == WebSocketBytes.wakeUp)
        return channel
    }
}

/// Frames as they travel, for raw channel tests.
enum WebSocketBytes {
    /// The server's wake-up: an unmasked text frame `sync`.
    static let wakeUp = Data([0x81, 0x04]) + Data("sync".utf8)

    /// A client frame (clients mask theirs) with a payload under 64 KiB.
    static func masked(opcode: UInt8, _ payload: Data = Data()) -> Data {
        let mask: [UInt8] = [1, 2, 3, 4]
        let length: [UInt8] = payload.count < 126
            ? [0x80 | UInt8(payload.count)] : [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        return Data([0x80 | opcode] + length + mask) + Data(payload.enumerated().map { $0.element ^ mask[$0.offset % 4] })
    }
}
