import Backplane
import Foundation
import HTTPTypes
import BackplaneWire
import Testing
import TestSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension DurabilityTests {
    /// Quiet syncs arrive many at once, and the server spends most of their nonces in memory
    /// alone; it is killed with SIGKILL in the middle and started again on the same data. Every
    /// sync it answered, replayed byte for byte, is refused: one signed before the crash as
    /// stale (the memory is gone, so the server refuses what it can no longer vouch for), one
    /// signed ahead of the server's clock as a reused nonce (those were written). A device that
    /// signs again with the timestamp the refusal names is answered.
    @Test func everyAnsweredSyncIsRefusedWhenReplayedAfterAKill() async throws {
        let dataDir = temporaryDirectory("backplane-kill-replay")
        defer { try? FileManager.default.removeItem(at: dataDir) }
        var served = try await ServedProcess.start(dataDir)
        defer { served.process.terminate() }
        let session = URLSession(configuration: .ephemeral)
        let registration = try await served.send(
            session, .post, "/v1/devices/register",
            body: try Client.encode(RegisterDeviceRequest(userId: "alice", deviceId: "phone", platform: "linux")))
        let credential = try WireJSON.decoder().decode(RegisterDeviceResponse.self, from: registration.data).deviceCredential
        let syncBody = try Client.encode(SyncRequest())
        let signer = served.signer

        let total = 600, inFlight = 32
        let answered = Box<[(headers: HTTPFields, ahead: Bool)]>()
        answered.value = []
        let server = served.process, port = served.port
        @Sendable func sync(_ index: Int) async {
            // Every fifth is signed a minute ahead of the server's clock: past the lease, so written.
            let ahead = index % 5 == 0
            let headers = signer.headers(
                method: .post, path: "/v1/sync", body: syncBody, deviceId: "phone", credential: credential,
                timestamp: Int64(Date().timeIntervalSince1970) + (ahead ? 60 : 0))
            guard let (_, status) = try? await ServedProcess.send(session, port: port, .post, "/v1/sync", headers: headers, body: syncBody),
                  status == 200
            else { return }
            let count = answered.update { $0.append((headers, ahead)); return $0.count }
            if count == 150 { server.signal(SIGKILL) }
        }
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<total {
                if index >= inFlight { await group.next() }
                group.addTask { await sync(index) }
            }
        }
        _ = try await served.process.waitForExit(timeout: .seconds(30))
        let replays = try #require(answered.value)
        #expect(replays.count >= 150 && replays.count < total, "the kill did not land in the middle of the load: \(replays.count) of \(total)")
        #expect(replays.contains { $0.ahead } && replays.contains { !$0.ahead })

        served = try await ServedProcess.start(dataDir, signer: signer)
        var notBefore: Int64 = 0
        for replay in replays {
            let (data, status) = try await ServedProcess.send(session, port: served.port, .post, "/v1/sync", headers: replay.headers, body: syncBody)
            let refusal = try? WireJSON.decoder().decode(ErrorBody.self, from: data).error
            #expect(status == 401, "a sync answered before the kill was accepted again")
            #expect(refusal?.code == (replay.ahead ? .nonceReused : .staleTimestamp), "\(String(decoding: data, as: UTF8.self))")
            notBefore = max(notBefore, refusal?.details?["notBefore"]?.intValue ?? 0)
        }
        #expect(notBefore > 0)
        let fresh = signer.headers(method: .post, path: "/v1/sync", body: syncBody, deviceId: "phone", credential: credential, timestamp: notBefore)
        #expect(try await ServedProcess.send(session, port: served.port, .post, "/v1/sync", headers: fresh, body: syncBody).status == 200)
    }
}

/// A `backplane serve` child process on a data directory, and the app key its first run printed.
struct ServedProcess {
    let process: ChildProcess
    let port: Int
    let signer: Signer
    /// What it printed up to its listening line.
    let banner: String

    /// Starts the built `backplane` on `dataDirectory`. A restart prints no key: pass the first run's `signer`.
    static func start(_ dataDirectory: URL, signer: Signer? = nil) async throws -> ServedProcess {
        let binary = try #require(BuiltProduct.url(named: "backplane"), "build the backplane product first")
        let process = try ChildProcess(binary, ["serve", "--port", "0", "--data-dir", dataDirectory.path, "--log-level", "error"])
        let banner = try await process.waitForOutput(containing: "backplane: listening on", timeout: .seconds(60))
        let port = try #require(FirstRunOutput.port(in: banner))
        let keySigner = try signer ?? Signer(
            keyId: try #require(FirstRunOutput.value(after: "app key id     :", in: banner)),
            secret: try #require(FirstRunOutput.value(after: "app key secret :", in: banner)))
        return ServedProcess(process: process, port: port, signer: keySigner, banner: banner)
    }

    /// Sends a request signed with the app key alone.
    func send(_ session: URLSession, _ method: HTTPRequest.Method, _ path: String, body: Data) async throws -> (data: Data, status: Int) {
        try await Self.send(session, port: port, method, path, headers: signer.headers(method: method, path: path, body: body), body: body)
    }

    static func send(
        _ session: URLSession, port: Int, _ method: HTTPRequest.Method, _ path: String, headers: HTTPFields, body: Data
    ) async throws -> (data: Data, status: Int) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method.rawValue
        request.httpBody = body
        for field in headers { request.setValue(field.value, forHTTPHeaderField: field.name.rawName) }
        let (data, response) = try await session.data(for: request)
        return (data, (response as? HTTPURLResponse)?.statusCode ?? 0)
    }
}
