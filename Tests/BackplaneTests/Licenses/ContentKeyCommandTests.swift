@testable import Backplane
import Foundation
import BackplaneWire
import Testing
import TestSupport

/// `backplane app content-keys` and what `backup` says of the key-encryption key, through the
/// built executable.
@Suite struct ContentKeyCommandTests {
    @Test func theCommandLineSetsGeneratesListsAndTheBackupNamesItsKey() async throws {
        let binary = try #require(BuiltProduct.url(named: "backplane"), "build the backplane product first")
        let work = temporaryDirectory("backplane-content-keys")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let data = work.appendingPathComponent("data").path
        let created = try await ChildProcess.run(binary, ["app", "create", "--name", "films", "--data-dir", data])
        #expect(created.status == 0, "\(created.output)")
        let app = try #require(created.output.split(separator: "\n").first { $0.hasPrefix("application id") }?.split(separator: ":").last)
            .trimmingCharacters(in: .whitespaces)

        // The first command that seals makes the data directory's key, and says so.
        let generated = try await ChildProcess.run(binary, ["app", "content-keys", "generate", "--app", app, "--asset", "film", "--data-dir", data])
        #expect(generated.status == 0, "\(generated.output)")
        #expect(generated.output.contains("made the key-encryption key"))
        let kekFile = URL(fileURLWithPath: data).appendingPathComponent(KeyEncryptionKey.fileName)
        let kek = try KeyEncryptionKey(contentsOf: kekFile)
        let json = try #require(generated.output.range(of: "{").map { String(generated.output[$0.lowerBound...]) })
        let key = try WireJSON.decoder().decode(GeneratedContentKey.self, from: Data(json.utf8))

        let keysFile = work.appendingPathComponent("keys.json")
        try WireJSON.encoder().encode(ContentKeysRequest(keys: [.init(kid: "11112222333344445555666677778888", key: "99990000aaaabbbbccccddddeeeeffff")]))
            .write(to: keysFile)
        let set = try await ChildProcess.run(
            binary, ["app", "content-keys", "set", "--app", app, "--asset", "trailer", "--keys-file", keysFile.path, "--data-dir", data])
        #expect(set.status == 0 && !set.output.contains("made the key-encryption key"), "\(set.output)")
        // A key id opens one asset: the generated one cannot be given to the trailer too.
        try WireJSON.encoder().encode(ContentKeysRequest(keys: [.init(kid: key.kid, key: key.key)])).write(to: keysFile)
        let taken = try await ChildProcess.run(
            binary, ["app", "content-keys", "set", "--app", app, "--asset", "trailer", "--keys-file", keysFile.path, "--data-dir", data])
        #expect(taken.status != 0 && taken.output.contains("already opens asset 'film'"), "\(taken.output)")

        let listed = try await ChildProcess.run(binary, ["app", "content-keys", "list", "--app", app, "--asset", "film", "--data-dir", data])
        #expect(listed.status == 0 && listed.output.contains(key.kid) && !listed.output.contains(key.key), "\(listed.output)")

        let backup = work.appendingPathComponent("backup.sqlite").path
        let backedUp = try await ChildProcess.run(binary, ["backup", "--to", backup, "--data-dir", data])
        #expect(backedUp.status == 0, "\(backedUp.output)")
        #expect(backedUp.output.contains("content_keys 2") && backedUp.output.contains("key-encryption key \(kek.fingerprint)"), "\(backedUp.output)")
        #expect(!backedUp.output.contains(key.key))
    }
}
