import Crypto
import Foundation
import HTTPTypes
import BackplaneWire
import Testing
import TestSupport

/// Pushes from two `backplane serve` processes on one PostgreSQL database, pointed at the local
/// providers with the operator's flags (`--apns-url`, `--fcm-url`, `--google-token-url`,
/// `--push-ca-file`): one push per device, whichever node took the admin call, and none for a
/// device whose channel is open on the other node.
@Suite(.serialized, .enabled(if: PostgresCluster.isAvailable, "PostgreSQL is not installed"))
struct PostgresPushTests {
    typealias Node = PostgresNodeTests.Node

    static func start(_ binary: URL, databaseURL: String, rig: PushRig) async throws -> (Node, output: String) {
        let process = try ChildProcess(binary, [
            "serve", "--port", "0", "--database-url", databaseURL, "--registration-rate-limit", "0", "--user-registration-rate-limit", "0",
            "--apns-url", rig.apns.server.url.absoluteString, "--fcm-url", rig.google.server.url.absoluteString,
            "--google-token-url", rig.google.tokenURL.absoluteString, "--push-ca-file", rig.certificates.authority.path,
        ])
        let output = try await process.waitForOutput(containing: "backplane: listening on", timeout: .seconds(60))
        return (Node(process: process, port: try #require(FirstRunOutput.port(in: output))), output)
    }

    static func register(_ device: String, token: String, provider: PushProvider, keys: DeviceKeys, signer: Signer, on node: Node) async throws -> String {
        let body = try JSONEncoder().encode(RegisterDeviceRequest(
            userId: "ann", deviceId: device, platform: provider == .apns ? "ios" : "android", pushToken: token, pushProvider: provider,
            devicePublicKey: DeviceKeys.publicKey(keys.key(for: device))))
        let (status, data) = try await node.send(
            .post, "/v1/devices/register", body: body,
            headers: signer.headers(method: .post, path: "/v1/devices/register", body: body, proofKey: keys.key(for: device)))
        #expect(status == 201, "\(String(decoding: data, as: UTF8.self))")
        return try WireJSON.decoder().decode(RegisterDeviceResponse.self, from: data).deviceCredential
    }

    @Test func twoNodesPushEachDeviceOnceAndNotOneWhoseChannelIsOpenOnTheOther() async throws {
        let binary = try #require(ExecutableTests.executable, "build the backplane product first")
        let databaseURL = try await PostgresCluster.shared.database()
        let rig = try await PushRig.start()
        defer { Task { await rig.stop() } }
        let (a, output) = try await Self.start(binary, databaseURL: databaseURL, rig: rig)
        defer { a.process.terminate() }
        let (signer, admin) = try PostgresNodeTests.credentials(output)
        let (b, _) = try await Self.start(binary, databaseURL: databaseURL, rig: rig)
        defer { b.process.terminate() }

        #expect(try await a.send(.put, "/v1/admin/push/apns", body: try JSONEncoder().encode(rig.apnsCredentials), headers: admin).0 == 200)
        let fcm = try JSONEncoder().encode(FCMCredentialsUpdate(serviceAccount: rig.serviceAccount))
        #expect(try await b.send(.put, "/v1/admin/push/fcm", body: fcm, headers: admin).0 == 200)
        let keys = DeviceKeys()
        let phoneCredential = try await Self.register("phone", token: "aa01", provider: .apns, keys: keys, signer: signer, on: a)
        try await Self.register("tablet", token: "bb02", provider: .apns, keys: keys, signer: signer, on: a)
        try await Self.register("pixel", token: "fcm-pixel", provider: .fcm, keys: keys, signer: signer, on: b)
        // The phone's app runs: its channel is open on node A.
        let channel = try await PostgresNodeTests.openChannel(a, signer: signer, device: "phone", credential: phoneCredential)
        defer { channel.disconnect() }

        // Every wipe goes to node B, which holds no channel.
        for device in ["phone", "tablet", "pixel"] {
            let wipe = try JSONEncoder().encode(EnqueueCommandRequest(type: .wipe, deviceId: device))
            #expect(try await b.send(.post, "/v1/admin/commands", body: wipe, headers: admin).0 == 201)
        }
        #expect(await PushRig.eventually(within: PushTests.patience) { rig.apns.pushes.count == 1 && rig.google.messages.count == 1 })
        // Node A answered that it woke the phone: node B pushed only the others.
        #expect(rig.apns.pushes.map(\.token) == ["bb02"])
        #expect(rig.google.messages.map(\.token) == ["fcm-pixel"])

        // Commands for the tablet through both nodes at once: the 30 s spacing is one row both
        // nodes claim, so no second push goes out.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for node in [a, b, a, b] {
                group.addTask {
                    let wipe = try JSONEncoder().encode(EnqueueCommandRequest(type: .wipe, deviceId: "tablet"))
                    #expect(try await node.send(.post, "/v1/admin/commands", body: wipe, headers: admin).0 == 201)
                }
            }
            try await group.waitForAll()
        }
        try await Task.sleep(for: .seconds(1))
        #expect(rig.apns.pushes.map(\.token) == ["bb02"])
        #expect(rig.google.messages.count == 1)
    }
}
