import ArgumentParser
import ClientSDK
import Foundation

// Where the harness finds the backplane and who it is, from flags or the environment.

struct ConnectionOptions: ParsableArguments {
    // Not `--url`: `download --url` names the asset to fetch.
    @Option(name: .customLong("backplane-url"), help: "Backplane URL (or BACKPLANE_URL).") var backplaneURL: String?
    @Option(help: "App key id (or BACKPLANE_APP_KEY).") var key: String?
    @Option(help: "App key secret (or BACKPLANE_APP_SECRET).") var secret: String?
    @Option(help: "User id (or BACKPLANE_USER).") var user: String?
    @Option(help: "The SDK's data directory: one per simulated device.") var dataDir = "./harness-data"
    @Option(help: "External device id to register with.") var externalId: String?
    @Option(help: "Nickname to register with.") var nickname: String?
    @Flag(help: "Move the device when it is registered to another user.") var move = false
    @Option(help: "Request timeout in seconds.") var timeout = 10
    @Option(help: "PEM file of certificate authorities to trust besides the system's (or BACKPLANE_CA_FILE).") var caFile: String?
    @Option(help: "User token (a JWT from the app's backend) sent when the device registers (or BACKPLANE_USER_TOKEN).")
    var userToken: String?
    @Option(help: ArgumentHelp(
        "Seconds the device's clock is set ahead (negative: behind), as a user sets it, to try rights and licenses over time.",
        valueName: "seconds"))
    var clockOffset: Double = 0

    /// The private CA's certificates, when the backplane's certificate comes from one.
    var trustedAuthorities: URL? {
        (caFile ?? ProcessInfo.processInfo.environment["BACKPLANE_CA_FILE"]).flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
    }

    func configuration(dataDirectory: URL? = nil) throws -> BackplaneClientConfiguration {
        let environment = ProcessInfo.processInfo.environment
        func value(_ option: String?, _ variable: String, _ name: String) throws -> String {
            guard let value = option ?? environment[variable], !value.isEmpty else {
                throw ValidationError("Missing --\(name) (or \(variable)).")
            }
            return value
        }
        let urlText = try value(backplaneURL, "BACKPLANE_URL", "backplane-url")
        guard let backplaneURL = URL(string: urlText), backplaneURL.scheme != nil else {
            throw ValidationError("'\(urlText)' is not a URL.")
        }
        return BackplaneClientConfiguration(
            backplaneURL: backplaneURL, appKeyId: try value(key, "BACKPLANE_APP_KEY", "key"),
            appKeySecret: try value(secret, "BACKPLANE_APP_SECRET", "secret"),
            userId: try value(user, "BACKPLANE_USER", "user"),
            dataDirectory: dataDirectory ?? URL(fileURLWithPath: dataDir),
            device: DeviceDescription(
                externalDeviceId: externalId, nickname: nickname, model: "backplane-harness", appVersion: "harness", moveFromOtherUser: move),
            sync: SyncOptions(
                retry: RetryPolicy(initial: .seconds(1), maximum: .seconds(30)), requestTimeout: .seconds(timeout),
                // One-shot commands sync once; only `watch` keeps the wake-up channel open.
                useWakeUpChannel: false),
            rights: RightsOptions(deviceClock: SetDeviceClock(offset: clockOffset.isFinite ? clockOffset : 0)),
            trustedCertificateAuthorities: trustedAuthorities,
            userToken: token.map { token in { @Sendable _ in token } })
    }

    /// The user token given, as the app's backend would hand it over.
    private var token: String? {
        (userToken ?? ProcessInfo.processInfo.environment["BACKPLANE_USER_TOKEN"]).flatMap { $0.isEmpty ? nil : $0 }
    }
}

/// The device's clock as a user may set it: the wall clock moved by `offset` seconds (the
/// monotonic clock does not move).
struct SetDeviceClock: DeviceClock {
    let offset: TimeInterval
    private let system = SystemDeviceClock()

    var wallNow: Date { system.wallNow.addingTimeInterval(offset) }
    var monotonicNow: TimeInterval { system.monotonicNow }
}
