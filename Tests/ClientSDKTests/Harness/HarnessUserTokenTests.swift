import Crypto
import Foundation
import JWTKit
import BackplaneWire
import Testing
import TestSupport

/// User tokens from the outside: the built `backplane` serving, `backplane app user-identity`
/// setting the application's keys on its data directory, and the built harness registering with
/// and without `--user-token` / `BACKPLANE_USER_TOKEN`.
@Suite(.serialized) struct HarnessUserTokenTests {
    @Test func theHarnessRegistersOnlyWithAValidTokenOnceTheCommandRequiresThem() async throws {
        let root = temporaryDirectory("backplane-user-token-e2e")
        defer { try? FileManager.default.removeItem(at: root) }
        let backplane = try await HarnessEndToEndTests.ServedBackplane(root: root)
        defer { backplane.process.terminate() }
        let harness = try backplane.harness(user: "alice")
        // Before any configuration: no token is needed.
        #expect(try await harness.run(["register"], device: "before").status == 0)

        // The app's backend: an ES256 key, published as a JSON Web Key Set.
        let key = P256.Signing.PrivateKey()
        let point = key.publicKey.x963Representation
        let jwks = """
            {"keys": [{"kty": "EC", "crv": "P-256", "kid": "backend-1", "x": "\(Base64URL.encode(point[1..<33]))", "y": "\(Base64URL.encode(point[33..<65]))"}]}
            """
        let jwksFile = root.appendingPathComponent("jwks.json")
        try jwks.write(to: jwksFile, atomically: true, encoding: .utf8)
        let command = try #require(BuiltProduct.url(named: "backplane"))
        let set = try await ChildProcess.run(command, [
            "app", "user-identity", "set", "--app", backplane.applicationId, "--issuer", "https://backend.example", "--audience", "video-app",
            "--jwks-file", jwksFile.path, "--required", "--data-dir", backplane.dataDir,
        ])
        #expect(set.status == 0, "\(set.output)")
        let shown = try await ChildProcess.run(command, ["app", "user-identity", "show", "--app", backplane.applicationId, "--data-dir", backplane.dataDir])
        #expect(shown.output.contains("\"required\" : true") && shown.output.contains("backend-1"), "\(shown.output)")

        func token(for user: String, signedBy signer: P256.Signing.PrivateKey = key) async throws -> String {
            let keys = JWTKeyCollection()
            await keys.add(ecdsa: try ES256PrivateKey(backing: signer), kid: "backend-1")
            return try await keys.sign(UserTokenClaims(user: user, issuer: "https://backend.example", audience: "video-app"), kid: "backend-1")
        }

        let bare = try await harness.run(["register"], device: "phone")
        #expect(bare.status == 4, "registered without a token: \(bare.json)")
        let forged = try await harness.run(["register", "--user-token", try await token(for: "alice", signedBy: P256.Signing.PrivateKey())], device: "phone")
        #expect(forged.status == 4, "registered with a forged token: \(forged.json)")
        let otherUser = try await harness.run(["register", "--user-token", try await token(for: "bob")], device: "phone")
        #expect(otherUser.status == 4, "registered with bob's token: \(otherUser.json)")

        let valid = try await token(for: "alice")
        let registered = try await harness.run(["register", "--user-token", valid], device: "phone")
        #expect(registered.status == 0, "\(registered.json)")
        // The token is never stored: no file of the device's data directory holds it.
        let files = FileManager.default.enumerator(at: root.appendingPathComponent("phone"), includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL } ?? []
        #expect(!files.isEmpty)
        for file in files {
            if let bytes = try? Data(contentsOf: file) { #expect(bytes.range(of: Data(valid.utf8)) == nil, "\(file.lastPathComponent) holds the token") }
        }
        // Once registered, the device syncs on its credential alone.
        #expect(try await harness.run(["sync"], device: "phone").status == 0)

        var fromEnvironment = harness
        fromEnvironment.environment["BACKPLANE_USER_TOKEN"] = try await token(for: "alice")
        #expect(try await fromEnvironment.run(["register"], device: "tablet").status == 0)
    }
}
