import ArgumentParser
import ClientSDK
import Foundation

extension CMCDOptions.Transmission: ExpressibleByArgument {}

// The engine's settings `download` takes beside the asset: how it fetches, and the device it
// runs on.

/// How many files at once, the per-host cap, the bandwidth cap and the origins' trust.
struct DownloadPaceOptions: ParsableArguments {
    @Option(name: .customLong("parallel"), help: "Files fetched at once at the start (then as many as the link rewards, unless --fixed-concurrency).") var parallelFiles = 4
    @Flag(name: .customLong("fixed-concurrency"), help: "Hold --parallel files at once instead of adapting to the link.") var fixedConcurrency = false
    @Option(name: .customLong("max-connections-per-host"), help: "Requests in flight to one HTTP/1.1 host, 1 to 64 (default 16).") var maxConnectionsPerHost = 16
    @Option(name: .customLong("bandwidth-limit"), help: "The most downloads take from the network, in bytes per second (default: no cap).") var bandwidthLimit: Int64?
    @Option(name: .customLong("origin-ca-file"), help: "A PEM file of certificate authorities trusted for origins beside the system's.") var originCAFile: String?
    @Option(help: "Send Common Media Client Data (CTA-5004) with every file request: query or headers (default: none).") var cmcd: CMCDOptions.Transmission?

    func apply(to options: inout DownloadOptions) {
        options.parallelFiles = parallelFiles
        options.adaptsConcurrency = !fixedConcurrency
        options.maxConnectionsPerHost = maxConnectionsPerHost
        options.maxBytesPerSecond = bandwidthLimit
        options.originCertificateAuthorities = originCAFile.map { URL(fileURLWithPath: $0) }
        options.cmcd = cmcd.map { CMCDOptions(transmission: $0) }
    }
}

/// The device's conditions as the harness stands them in for the system's monitors, and the
/// conditions an app would set (`DownloadConditions`).
struct DeviceConditionOptions: ParsableArguments {
    @Option(name: .customLong("battery"), help: "Stand in a battery at this level, 0 to 100 (default: mains power, no battery).") var batteryPercent: Double?
    @Flag(help: "Stand in a device off its charger (default: on a charger).") var unplugged = false
    @Flag(name: .customLong("metered-network"), help: "Stand in a metered network (Low Data Mode, metered Wi-Fi).") var meteredNetwork = false
    @Flag(name: .customLong("require-charging"), help: "Download only on a charger.") var requireCharging = false
    @Option(name: .customLong("min-battery"), help: "Off a charger, download only with the battery at this level or above, 0 to 100.") var minimumBatteryPercent: Double?
    @Flag(name: .customLong("require-unmetered"), help: "Download only on an unmetered network.") var requireUnmetered = false

    func apply(to options: inout DownloadOptions) {
        options.conditions = DownloadConditions(
            requiresCharging: requireCharging, minimumBatteryLevel: minimumBatteryPercent.map { $0 / 100 },
            requiresUnmeteredNetwork: requireUnmetered)
        if batteryPercent != nil || unplugged {
            options.power = FixedPower(status: PowerStatus(batteryLevel: batteryPercent.map { $0 / 100 }, isCharging: !unplugged))
        }
        if meteredNetwork {
            options.network = FixedNetwork(status: NetworkStatus(isAvailable: true, isExpensive: false, isMetered: true))
        }
    }
}

/// A power status that holds for the harness's run.
struct FixedPower: PowerMonitor {
    let status: PowerStatus
    func changes() -> AsyncStream<PowerStatus> { AsyncStream { $0.finish() } }
}

/// A network status that holds for the harness's run.
struct FixedNetwork: NetworkMonitor {
    let status: NetworkStatus
    func changes() -> AsyncStream<NetworkStatus> { AsyncStream { $0.finish() } }
}

