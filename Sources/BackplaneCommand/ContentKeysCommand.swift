import ArgumentParser
import Backplane
import Foundation
import BackplaneWire

/// Where content keys are sealed: `--key-encryption-key-file`, else (SQLite) the data
/// directory's own key, made on first use; PostgreSQL without a file has none.
struct KeyEncryptionOptions: ParsableArguments {
    @Option(
        name: .customLong("key-encryption-key-file"),
        help: ArgumentHelp(
            "A file of 64 hex digits (openssl rand -hex 32) that seals content keys at rest (env BACKPLANE_KEY_ENCRYPTION_KEY_FILE).",
            discussion: "Without it an embedded backplane makes <data-dir>/key-encryption-key on first start; every PostgreSQL node needs the same file."))
    var fileFlag: String?

    var file: String? { Environment.resolve(fileFlag, option: "key-encryption-key-file") }

    func validate() throws {
        if let file, !FileManager.default.isReadableFile(atPath: file) {
            throw ValidationError("--key-encryption-key-file: \(file) cannot be read.")
        }
    }

    /// The key, and a line to print when one was just made.
    func key(for data: StoreOptions) throws -> (key: KeyEncryptionKey?, made: String?) {
        if let file { return (try KeyEncryptionKey(contentsOf: URL(fileURLWithPath: file)), nil) }
        guard data.databaseURL == nil else { return (nil, nil) }
        let (key, created) = try KeyEncryptionKey.inDataDirectory(data.url)
        let path = data.url.appendingPathComponent(KeyEncryptionKey.fileName).path
        return (key, created ? "backplane: made the key-encryption key \(path) (\(key.fingerprint)); back it up apart from the database: the content keys in it cannot be opened without it." : nil)
    }
}

extension AppCommand {
    /// `backplane app content-keys list|set|generate`: what `/v1/admin/assets/{assetId}/keys`
    /// do, on the host, against the store directly. Keys are read from a file, never from the
    /// command line (which other users of the host can see).
    struct ContentKeysCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "content-keys",
            abstract: "List, set or generate an asset's content keys (docs/operations.md).",
            subcommands: [List.self, Set.self, Generate.self])

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Print the asset's key ids as JSON (never a key).")
            @Option(help: "The application id.") var app: String
            @Option(help: "The asset id.") var asset: String
            @OptionGroup var data: StoreOptions

            func run() async throws {
                let response = try await data.withStore { store in
                    try await AppCommand.existing(app, in: store)
                    return try await ContentKeyService(store: store, sealing: nil).list(applicationId: app, assetId: asset)
                }
                try AppCommand.printJSON(response)
            }
        }

        struct Set: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Replace the asset's keys with those of a JSON file: {\"keys\":[{\"kid\":\"<32 hex>\",\"key\":\"<32 hex>\"}]}.")
            @Option(help: "The application id.") var app: String
            @Option(help: "The asset id.") var asset: String
            @Option(help: "The JSON file of keys.") var keysFile: String
            @OptionGroup var data: StoreOptions
            @OptionGroup var sealing: KeyEncryptionOptions

            func run() async throws {
                let request: ContentKeysRequest
                do {
                    request = try JSONDecoder().decode(ContentKeysRequest.self, from: try Data(contentsOf: URL(fileURLWithPath: keysFile)))
                } catch {
                    throw ValidationError("\(keysFile) is not a JSON file of keys: \(error.localizedDescription)")
                }
                let key = try sealing.key(for: data)
                if let made = key.made { Swift.print(made) }
                let response = try await data.withStore { store in
                    try await AppCommand.existing(app, in: store)
                    return try await ContentKeyService(store: store, sealing: key.key).set(applicationId: app, assetId: asset, request)
                }
                try AppCommand.printJSON(response)
            }
        }

        struct Generate: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Make a key for the asset and print it as JSON, once: give it to the packager now.")
            @Option(help: "The application id.") var app: String
            @Option(help: "The asset id.") var asset: String
            @OptionGroup var data: StoreOptions
            @OptionGroup var sealing: KeyEncryptionOptions

            func run() async throws {
                let key = try sealing.key(for: data)
                if let made = key.made { Swift.print(made) }
                let response = try await data.withStore { store in
                    try await AppCommand.existing(app, in: store)
                    return try await ContentKeyService(store: store, sealing: key.key).generate(applicationId: app, assetId: asset)
                }
                try AppCommand.printJSON(response)
            }
        }
    }
}
