import ArgumentParser
import ClientSDK
import Foundation

// The device commands: register, sync, status, the user's devices, download on/off, unregister.

struct Register: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Register this device (idempotent) and sync once.")
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "A push token to give the backplane once registered (an APNs device token, an FCM registration token).")
    var pushToken: String?
    @Option(help: "Who delivers to --push-token: apns or fcm.") var pushProvider: String?

    func validate() throws {
        if pushToken != nil, pushProvider.flatMap(PushProvider.known) == nil {
            throw ValidationError("--push-token needs --push-provider apns or fcm.")
        }
        if pushToken == nil, pushProvider != nil { throw ValidationError("--push-provider goes with --push-token.") }
    }

    func run() async throws {
        let push = pushToken.flatMap { token in pushProvider.flatMap(PushProvider.known).map { (token, $0) } }
        try await Session.run(try connection.configuration()) { engine in
            _ = try await Session.requireSynced(engine)
            if let (token, provider) = push { _ = try await engine.updatePushToken(token, provider: provider) }
            return nil
        }
    }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Sync once (registering first if needed).")
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await Session.run(try connection.configuration(), Session.requireSynced)
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show what the SDK has stored, without the network.")
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let engine = BackplaneEngine(configuration: try connection.configuration())
        do {
            try await engine.loadLocalState()
        } catch let error as BackplaneClientError {
            Output.fail(error)
        }
        Output.print(StatusOutput(await engine.status))
    }
}

struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the user's devices.")
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await Session.run(try connection.configuration()) { engine in
            let devices = try await engine.userDevices()
            return .object([
                "devices": Output.json(devices.devices),
                "downloadEnabledCount": .int(Int64(devices.downloadEnabledCount)),
                "deviceLimit": .int(Int64(devices.settings.deviceLimit)),
            ])
        }
    }
}

struct EnableDownload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enable-download",
        abstract: "Ask the backplane to turn download on or off for this device, or off for another device of the user.")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "on or off") var setting: OnOff
    @Option(help: "Another device of the user (from `devices`): turn download off there, to free a place under the device limit.")
    var device: String?

    enum OnOff: String, ExpressibleByArgument {
        case on, off
    }

    func validate() throws {
        if device != nil, setting == .on {
            throw ValidationError("Another device's download can only be turned off; a device turns download on for itself.")
        }
    }

    func run() async throws {
        try await Session.run(try connection.configuration()) { engine in
            let changed = if let device {
                try await engine.disableDownload(onDevice: device)
            } else {
                try await engine.updateDownloadEnabled(setting == .on)
            }
            return .object(["device": Output.json(changed)])
        }
    }
}

struct Unregister: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Unregister this device.")
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await Session.run(try connection.configuration()) { engine in
            try await engine.unregister()
            return nil
        }
    }
}
