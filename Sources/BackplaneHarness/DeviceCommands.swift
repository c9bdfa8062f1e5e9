import ArgumentParser
import ClientSDK
import Foundation

// The device commands: register, sync, status, the user's devices, download on/off, unregister.

struct Register: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Register this device (idempotent) and sync once.")
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await Session.run(try connection.configuration(), Session.requireSynced)
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
        commandName: "enable-download", abstract: "Ask the backplane to turn download on or off for this device.")
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "on or off") var setting: OnOff

    enum OnOff: String, ExpressibleByArgument {
        case on, off
    }

    func run() async throws {
        try await Session.run(try connection.configuration()) { engine in
            let device = try await engine.updateDownloadEnabled(setting == .on)
            return .object(["device": Output.json(device)])
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
