import ArgumentParser
import Backplane
import Foundation
import BackplaneWire

extension AppCommand {
    /// `backplane app push show|set-apns|set-fcm|clear`: what `/v1/admin/push...` do, on the
    /// host, against the store directly. Keys are read from files, never from the command line
    /// (which other users of the host can see).
    struct PushCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "push",
            abstract: "Show, set or clear an application's APNs and FCM credentials (docs/operations.md).",
            subcommands: [Show.self, SetAPNs.self, SetFCM.self, Clear.self])

        struct Show: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Print the push settings as JSON (never a key).")
            @Option(help: "The application id.") var app: String
            @OptionGroup var data: StoreOptions

            func run() async throws {
                let response = try await data.withStore { store in
                    try await AppCommand.existing(app, in: store)
                    return try await PushCredentialsService(store: store).configuration(applicationId: app)
                }
                try AppCommand.printJSON(response)
            }
        }

        struct SetAPNs: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set-apns",
                abstract: "Set the APNs provider key (.p8) the application's Apple devices are pushed with.",
                discussion: "Create the key in Apple's developer account (Certificates, Identifiers & Profiles → Keys, with Apple Push Notifications service).")
            @Option(help: "The application id.") var app: String
            @Option(help: "The Apple Developer team id.") var teamId: String
            @Option(help: "The key's id (shown beside the key in Apple's developer account).") var keyId: String
            @Option(help: "The .p8 file Apple gave for the key.") var keyFile: String
            @Option(help: "The app's bundle id (the apns-topic).") var topic: String
            @Option(help: "production (App Store, TestFlight) or sandbox (development builds).") var environment: String = "production"
            @OptionGroup var data: StoreOptions

            func run() async throws {
                guard let environment = APNsEnvironment.known(environment) else {
                    throw ValidationError("--environment must be production or sandbox.")
                }
                let key: String
                do {
                    key = try String(contentsOfFile: keyFile, encoding: .utf8)
                } catch {
                    throw ValidationError("\(keyFile) cannot be read: \(error.localizedDescription)")
                }
                let update = APNsCredentialsUpdate(teamId: teamId, keyId: keyId, privateKey: key, topic: topic, environment: environment)
                let response = try await data.withStore { store in
                    try await AppCommand.existing(app, in: store)
                    return try await PushCredentialsService(store: store).setAPNs(applicationId: app, update)
                }
                try AppCommand.printJSON(response)
            }
        }

        struct SetFCM: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set-fcm",
                abstract: "Set the Google service account the application's Android devices are pushed as.",
                discussion: "Create it in the Firebase console (Project settings → Service accounts → Generate new private key).")
            @Option(help: "The application id.") var app: String
            @Option(help: "The service account's JSON key file.") var serviceAccountFile: String
            @OptionGroup var data: StoreOptions

            func run() async throws {
                let account: JSONValue
                do {
                    account = try JSONDecoder().decode(JSONValue.self, from: try Data(contentsOf: URL(fileURLWithPath: serviceAccountFile)))
                } catch {
                    throw ValidationError("\(serviceAccountFile) is not a JSON file: \(error.localizedDescription)")
                }
                let response = try await data.withStore { store in
                    try await AppCommand.existing(app, in: store)
                    return try await PushCredentialsService(store: store).setFCM(applicationId: app, FCMCredentialsUpdate(serviceAccount: account))
                }
                try AppCommand.printJSON(response)
            }
        }

        struct Clear: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Remove one provider's credentials: its devices are no longer pushed.")
            @Option(help: "The application id.") var app: String
            @Option(help: "apns or fcm.") var provider: String
            @OptionGroup var data: StoreOptions

            func run() async throws {
                guard let provider = PushProvider.known(provider) else { throw ValidationError("--provider must be apns or fcm.") }
                try await data.withStore { store in
                    try await AppCommand.existing(app, in: store)
                    try await PushCredentialsService(store: store).delete(applicationId: app, provider: provider)
                }
                Swift.print("The \(provider.rawValue) credentials of \(app) are removed.")
            }
        }
    }
}
