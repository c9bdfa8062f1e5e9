@testable import Backplane
import Foundation
import GRDB
import HTTPTypes
import BackplaneWire
import Testing
import TestSupport

/// Assets' content keys through the admin API: set, generated once, listed without keys, and
/// never in the clear in the database.
@Suite struct ContentKeyTests {
    static let kid = "0123456789abcdef0123456789abcdef"
    static let key = "00112233445566778899aabbccddeeff"

    @Test func keysGoInAndOnlyTheirIdsComeOut() async throws {
        let fixture = try await Fixture.make()
        let directory = fixture.directory
        try await fixture.test { client in
            let set = try await client.admin(
                .put, "/v1/admin/assets/film/keys", json: ContentKeysRequest(keys: [.init(kid: Self.kid.uppercased(), key: Self.key)]))
            #expect(set.status == .ok, "\(set.text)")
            #expect(try set.decode(ContentKeyList.self).keys.map(\.kid) == [Self.kid])
            #expect(!set.text.contains(Self.key))

            let generated = try await client.admin(.post, "/v1/admin/assets/film/keys")
            #expect(generated.status == .created, "\(generated.text)")
            let made = try generated.decode(GeneratedContentKey.self)
            #expect(HexKey.bytes(made.kid) != nil && HexKey.bytes(made.key) != nil && made.kid != Self.kid)

            let listed = try await client.admin(.get, "/v1/admin/assets/film/keys")
            #expect(try listed.decode(ContentKeyList.self).keys.map(\.kid) == [Self.kid, made.kid])
            #expect(!listed.text.contains(made.key) && !listed.text.contains(Self.key), "\(listed.text)")
            #expect(try await client.admin(.get, "/v1/admin/assets/other/keys").decode(ContentKeyList.self).keys.isEmpty)

            // The keys opened by the key-encryption key, and not found in the database's bytes.
            let records = try await fixture.services.store.contentKeys(applicationId: fixture.applicationId, assetId: "film")
            let sealing = try fixture.services.contentKeys.keyEncryptionKey()
            #expect(try records.map { HexKey.text(try sealing.unseal($0)) } == [Self.key, made.key])
            // (The database file and its write-ahead log: the newest commits are in the log.)
            let database = try ["backplane.sqlite", "backplane.sqlite-wal"].reduce(into: Data()) { bytes, name in
                bytes += (try? Data(contentsOf: directory.appendingPathComponent(name))) ?? Data()
            }
            #expect(database.count > 0)
            for key in [Self.key, made.key] {
                let bytes = try #require(HexKey.bytes(key))
                #expect(database.range(of: bytes) == nil && database.range(of: Data(key.utf8)) == nil)
            }

            // PUT replaces: the generated key is gone.
            let replaced = try await client.admin(.put, "/v1/admin/assets/film/keys", json: ContentKeysRequest(keys: [.init(kid: Self.kid, key: Self.key)]))
            #expect(try replaced.decode(ContentKeyList.self).keys.map(\.kid) == [Self.kid])
        }
    }

    @Test func malformedKeysAreRefusedAndChangeNothing() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let good = ContentKeyInput(kid: Self.kid, key: Self.key)
            #expect(try await client.admin(.put, "/v1/admin/assets/film/keys", json: ContentKeysRequest(keys: [good])).status == .ok)
            let bad: [(ContentKeysRequest, String)] = [
                (.init(keys: [.init(kid: "0123", key: Self.key)]), "keys[0].kid"),
                (.init(keys: [.init(kid: Self.kid, key: "zz112233445566778899aabbccddeeff")]), "keys[0].key"),
                (.init(keys: [.init(kid: Self.kid, key: "+0112233445566778899aabbccddeeff")]), "keys[0].key"),
                (.init(keys: [.init(kid: "ffffffffffffffffffffffffffffffff", key: Self.key), .init(kid: "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", key: Self.key)]), "keys[1].kid"),
                (.init(keys: (0...WireLimits.maxContentKeysPerAsset).map { .init(kid: String(format: "%032x", $0 + 1), key: Self.key) }), "keys"),
            ]
            for (request, field) in bad {
                let refused = try await client.admin(.put, "/v1/admin/assets/film/keys", json: request)
                #expect(refused.status == .badRequest && refused.errorDetails?["field"] == .string(field), "\(refused.text)")
            }
            // A key id opens one asset.
            let taken = try await client.admin(.put, "/v1/admin/assets/trailer/keys", json: ContentKeysRequest(keys: [good]))
            #expect(taken.status == .conflict && taken.errorDetails?["assetId"] == .string("film"), "\(taken.text)")
            let raw = try await client.raw.execute(
                uri: "/v1/admin/assets/film/keys", method: .put,
                headers: [.authorization: "Bearer \(fixture.adminToken)", .contentType: "application/json"],
                body: .init(string: #"{"keys":[{"kid":"\#(Self.kid)"}]}"#))
            #expect(raw.status == .badRequest, "\(raw.body)")
            let listed = try await client.admin(.get, "/v1/admin/assets/film/keys").decode(ContentKeyList.self)
            #expect(listed.keys.map(\.kid) == [Self.kid])
            #expect(try await client.admin(.get, "/v1/admin/assets/trailer/keys").decode(ContentKeyList.self).keys.isEmpty)

            // Generating past the limit: the asset holds one, so the limit minus one more fit.
            for _ in 1..<WireLimits.maxContentKeysPerAsset {
                #expect(try await client.admin(.post, "/v1/admin/assets/film/keys").status == .created)
            }
            let full = try await client.admin(.post, "/v1/admin/assets/film/keys")
            #expect(full.status == .badRequest, "\(full.text)")
            // Only an admin token reaches them.
            let cms = try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .cms, name: "cms")
            #expect(try await client.admin(.get, "/v1/admin/assets/film/keys", token: cms).status == .forbidden)
        }
    }

    @Test func withoutAKeyEncryptionKeyKeysAreRefusedClearly() async throws {
        let directory = temporaryDirectory("backplane-tests")
        defer { try? FileManager.default.removeItem(at: directory) }
        let services = BackplaneServices(store: try SQLiteStore(directory: directory))
        let (application, _) = try await services.testApplication(name: "no kek")
        await #expect(throws: ServiceError.self) {
            try await services.contentKeys.generate(applicationId: application.id, assetId: "film")
        }
        do {
            _ = try await services.contentKeys.set(
                applicationId: application.id, assetId: "film", ContentKeysRequest(keys: [.init(kid: Self.kid, key: Self.key)]))
            Issue.record("set without a key-encryption key")
        } catch let error as ServiceError {
            #expect(error.code == .serviceUnavailable && error.message.contains("--key-encryption-key-file"))
        }
        #expect(try await services.store.contentKeys(applicationId: application.id, assetId: "film").isEmpty)
    }
}

/// The key-encryption key: made once, owner-only, and the only key that opens what it sealed.
@Suite struct KeyEncryptionKeyTests {
    @Test func theDataDirectoryKeyIsMadeOnceOwnerOnly() throws {
        let directory = temporaryDirectory("backplane-kek")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (first, created) = try KeyEncryptionKey.inDataDirectory(directory)
        #expect(created)
        let file = directory.appendingPathComponent(KeyEncryptionKey.fileName)
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int)
        #expect(mode & 0o777 == 0o600)
        let (again, createdAgain) = try KeyEncryptionKey.inDataDirectory(directory)
        #expect(!createdAgain && again.fingerprint == first.fingerprint)
        #expect(try KeyEncryptionKey(contentsOf: file).fingerprint == first.fingerprint)
    }

    @Test func onlyTheSealingKeyOpensAndOnlyForItsAsset() throws {
        let sealing = KeyEncryptionKey.generate()
        let key = try #require(HexKey.bytes(ContentKeyTests.key))
        let kid = ContentKeyTests.kid
        let record = ContentKeyRecord(
            applicationId: "app", assetId: "film", kid: kid, sealedKey: try sealing.seal(key, applicationId: "app", assetId: "film", kid: kid),
            sealedWith: sealing.fingerprint, createdAt: Date())
        #expect(try sealing.unseal(record) == key)
        var moved = record
        moved.assetId = "trailer"
        #expect(throws: KeyEncryptionKeyError.self) { try sealing.unseal(moved) }
        let other = KeyEncryptionKey.generate()
        do {
            _ = try other.unseal(record)
            Issue.record("another key-encryption key opened the key")
        } catch let error as KeyEncryptionKeyError {
            #expect(error.description.contains(sealing.fingerprint) && error.description.contains(other.fingerprint))
        }
        // The same key under another fingerprint (a forged row) still does not open.
        var forged = record
        forged.sealedWith = other.fingerprint
        #expect(throws: KeyEncryptionKeyError.self) { try other.unseal(forged) }
    }

    @Test func aKeyFileMustHold64HexDigits() throws {
        let directory = temporaryDirectory("backplane-kek")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("kek")
        for bad in ["", "abc", String(repeating: "g", count: 64), String(repeating: "a", count: 62)] {
            try Data(bad.utf8).write(to: file)
            #expect(throws: KeyEncryptionKeyError.self) { try KeyEncryptionKey(contentsOf: file) }
        }
        try Data((String(repeating: "ab", count: 32) + "\n").utf8).write(to: file)
        #expect(try KeyEncryptionKey(contentsOf: file).fingerprint.count == 16)
        #expect(throws: KeyEncryptionKeyError.self) { try KeyEncryptionKey(contentsOf: directory.appendingPathComponent("missing")) }
    }
}
