import ArgumentParser
import Backplane
import Foundation
import BackplaneWire

// Only the scopes this build knows (a vocabulary's own `init(rawValue:)` takes any text).
extension TokenScope: ExpressibleByArgument {
    public init?(argument: String) { guard let known = Self.known(argument) else { return nil }; self = known }
}

/// Bearer tokens from the host: the only way to make an admin token after the first run (the
/// admin API makes cms and reporting tokens only).
struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token", abstract: "Manage bearer tokens.", subcommands: [Create.self, List.self, Revoke.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a bearer token and print it (shown once).",
            discussion: "Standard output carries the token alone; its id goes to standard error.")
        @Option(help: "The application id.") var app: String
        @Option(help: "admin, cms or reporting.") var scope: TokenScope
        @Option(help: "What the token is for.") var name = "cli"
        @Option(help: "Days until the token stops working (1 to 3650); without it, it works until revoked.")
        var expiresInDays: Int?
        @OptionGroup var data: StoreOptions

        func validate() throws {
            if let expiresInDays, !(1...3650).contains(expiresInDays) { throw ValidationError("--expires-in-days must be 1 to 3650.") }
        }

        func run() async throws {
            let now = Date()
            let expiresAt = expiresInDays.map { now.addingTimeInterval(TimeInterval($0) * 86400) }
            let created = try await data.withStore { store in
                try await ApplicationService(store: store).issueToken(
                    applicationId: app, scope: scope, name: name, expiresAt: expiresAt, now: now)
            }
            // Unbuffered, so the token comes before the id when both streams go to one place.
            FileHandle.standardOutput.write(Data((created.token + "\n").utf8))
            FileHandle.standardError.write(Data("token id: \(created.info.tokenId)\n".utf8))
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List an application's tokens (never the tokens themselves).",
            discussion: "Columns: id, scope, name, created, expires, state (active, expired or revoked), last used.")
        @Option(help: "The application id.") var app: String
        @OptionGroup var data: StoreOptions

        func run() async throws {
            let tokens = try await data.withStore { store in try await ApplicationService(store: store).tokens(applicationId: app) }
            let now = Date()
            for token in tokens {
                let state = if token.revokedAt != nil { "revoked" } else if let end = token.expiresAt, end <= now { "expired" } else { "active" }
                print([token.tokenId, token.scope.rawValue, token.name, Self.time(token.createdAt), Self.time(token.expiresAt), state,
                       Self.time(token.lastUsedAt)].joined(separator: "\t"))
            }
        }

        static func time(_ date: Date?) -> String { date.map { $0.formatted(.iso8601) } ?? "-" }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a token: refused from its next request on, by every node.")
        @Argument(help: "The token's id (from 'token list').") var tokenId: String
        @Option(help: "The application id.") var app: String
        @OptionGroup var data: StoreOptions

        func run() async throws {
            let revoked = try await data.withStore { store in
                try await ApplicationService(store: store).revokeToken(applicationId: app, tokenId: tokenId)
            }
            print("\(revoked.tokenId) revoked at \(List.time(revoked.revokedAt))")
        }
    }
}
