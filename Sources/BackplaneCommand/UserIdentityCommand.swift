import ArgumentParser
import Backplane
import Foundation
import BackplaneWire

extension AppCommand {
    /// `backplane app user-identity show|set|clear`: what `PUT/GET/DELETE /v1/admin/user-identity`
    /// do, on the host, against the store directly.
    struct UserIdentityCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "user-identity",
            abstract: "Show, set or clear how an application's user tokens are checked (docs/operations.md).",
            subcommands: [Show.self, Set.self, Clear.self])

        struct Show: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Print the configuration as JSON (never the shared secret).")
            @Option(help: "The application id.") var app: String
            @OptionGroup var data: StoreOptions

            func run() async throws {
                let response = try await data.withStore { store in
                    try await AppCommand.existing(app, in: store)
                    return try await UserIdentityService(store: store).configuration(applicationId: app)
                }
                try AppCommand.printJSON(response)
            }
        }

        struct Set: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Set the issuer, audience and keys tokens are checked with, and whether they are required.",
                discussion: """
                    Give the keys as a JSON Web Key Set file (--jwks-file), a URL the server fetches (--jwks-url; the \
                    server must run with --allow-jwks-url), or a shared secret for HS256 (--hs256-secret-file). \
                    A secret set earlier is kept unless --remove-hs256-secret is given.
                    """)
            @Option(help: "The application id.") var app: String
            @Option(help: "The tokens' issuer ('iss').") var issuer: String
            @Option(help: "The tokens' audience ('aud').") var audience: String
            @Option(help: "A JSON Web Key Set file of the backend's public keys.") var jwksFile: String?
            @Option(help: "An https URL of the backend's JSON Web Key Set.") var jwksUrl: String?
            @Option(help: "A file holding the shared HS256 secret (at least 32 bytes; a final newline is dropped).") var hs256SecretFile: String?
            @Flag(help: "Remove the shared secret set earlier.") var removeHs256Secret = false
            @Flag(help: "Refuse registrations without a valid token (otherwise tokens sent are checked and the rest counted).")
            var required = false
            @OptionGroup var data: StoreOptions

            func validate() throws {
                if hs256SecretFile != nil, removeHs256Secret { throw ValidationError("Give --hs256-secret-file or --remove-hs256-secret, not both.") }
            }

            func run() async throws {
                var jwks: JSONValue?
                if let jwksFile {
                    do {
                        jwks = try JSONDecoder().decode(JSONValue.self, from: try Data(contentsOf: URL(fileURLWithPath: jwksFile)))
                    } catch {
                        throw ValidationError("\(jwksFile) is not a JSON file: \(error)")
                    }
                }
                var secret: String? = removeHs256Secret ? "" : nil
                if let hs256SecretFile {
                    var text = try String(contentsOfFile: hs256SecretFile, encoding: .utf8)
                    if text.hasSuffix("\n") { text.removeLast() }
                    secret = text
                }
                let update = UserIdentityUpdate(
                    required: required, issuer: issuer, audience: audience, jwks: jwks, jwksUrl: jwksUrl, hs256Secret: secret)
                let configuration = try await data.withStore { store in
                    try await AppCommand.existing(app, in: store)
                    // The operator may name a URL: the server fetches it only if it runs with --allow-jwks-url.
                    return try await UserIdentityService(store: store).set(applicationId: app, update, byOperator: true)
                }
                try AppCommand.printJSON(UserIdentityResponse(applicationId: app, configuration: configuration))
                if jwksUrl != nil {
                    FileHandle.standardError.write(Data("note: the server fetches --jwks-url only when it runs with --allow-jwks-url.\n".utf8))
                }
            }
        }

        struct Clear: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Remove the configuration: registrations need no token from then on.")
            @Option(help: "The application id.") var app: String
            @OptionGroup var data: StoreOptions

            func run() async throws {
                try await data.withStore { store in
                    try await AppCommand.existing(app, in: store)
                    try await UserIdentityService(store: store).delete(applicationId: app)
                }
                Swift.print("The user identity configuration of \(app) is removed.")
            }
        }

    }
}

extension AppCommand {
    /// Stops a per-application command with one line when the application does not exist.
    static func existing(_ app: String, in store: any BackplaneStore) async throws {
        guard try await ApplicationService(store: store).exists(applicationId: app) else {
            throw ValidationError("No application with id '\(app)'.")
        }
    }

    /// An admin answer as the API gives it, indented for a terminal.
    static func printJSON(_ value: some Encodable) throws {
        let encoder = WireJSON.encoder()
        encoder.outputFormatting.insert(.prettyPrinted)
        Swift.print(String(decoding: try encoder.encode(value), as: UTF8.self))
    }
}
