import Foundation
import BackplaneWire

// The wake-up channel: a WebSocket kept open while running.
extension BackplaneEngine {
    // MARK: the wake-up channel

    func startChannel() {
        guard configuration.sync.useWakeUpChannel, channel == nil else { return }
        channel = Task { [weak self] in await self?.runChannel() }
    }

    /// Keeps the channel open while running: reconnects with backoff and syncs on every wake-up.
    /// The server's first wake-up comes once the channel is registered, so the sync it starts
    /// catches up on what happened while the channel was down and nothing falls in between.
    func runChannel() async {
        var failures = 0
        while state == .running, !Task.isCancelled {
            if let credentials = registration?.credentials {
                let channel = DeviceChannel(api: api)
                try? await channel.run(
                    as: credentials,
                    onOpen: { [weak self] in await self?.channelOpened() },
                    onWakeUp: { [weak self] in await self?.syncNow() })
                failures = channelConnected ? 1 : failures + 1
                channelClosed()
            } else {
                failures += 1
            }
            guard state == .running, !Task.isCancelled else { return }
            try? await Task.sleep(for: configuration.sync.retry.delay(afterFailures: failures))
        }
    }

    func channelOpened() {
        channelConnected = true
        broadcaster.emit(.channelStateChanged(connected: true))
    }

    func channelClosed() {
        guard channelConnected else { return }
        channelConnected = false
        broadcaster.emit(.channelStateChanged(connected: false))
    }

    /// Whether the wake-up channel is open now.
    public var isChannelConnected: Bool { channelConnected }
}
