import Foundation
import Synchronization
import HTTPTypes
import HummingbirdWSClient
import Logging
import BackplaneWire

/// The device's wake-up channel: a WebSocket to `/v1/devices/{id}/channel` on which the
/// backplane sends `sync` when something for this device changed.
struct DeviceChannel: Sendable {
    static let wakeUpMessage = "sync"

    let api: BackplaneAPI

    /// Connects and calls `onOpen` once, then `onWakeUp` per wake-up, until the connection ends
    /// (returns) or fails (throws).
    func run(
        as credentials: DeviceCredentials,
        onOpen: @escaping @Sendable () async -> Void,
        onWakeUp: @escaping @Sendable () async -> Void
    ) async throws {
        let route = "/v1/devices/\(BackplaneAPI.segment(credentials.deviceId))/channel"
        let (url, pathAndQuery) = try api.url(for: route)
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            throw BackplaneClientError(kind: .invalidResponse, message: "Invalid backplane URL.")
        }
        components.scheme = components.scheme == "https" ? "wss" : "ws"
        guard let webSocketURL = components.string else {
            throw BackplaneClientError(kind: .invalidResponse, message: "Invalid backplane URL.")
        }
        var headers = HTTPFields()
        for (name, value) in try api.headers(method: "GET", pathAndQuery: pathAndQuery, body: Data(), device: credentials) {
            if let field = HTTPField.Name(name) { headers[field] = value }
        }
        let configuration = WebSocketClientConfiguration(
            additionalHeaders: headers, autoPing: .enabled(timePeriod: .seconds(60)))
        let logger = Logger(label: "backplane.sdk.channel", factory: { _ in SwiftLogNoOpLogHandler() })
        try await WebSocketClient.connect(url: webSocketURL, configuration: configuration, tlsConfiguration: api.channelTLS, logger: logger) {
            inbound, _, _ in
            await onOpen()
            for try await message in inbound.messages(maxSize: 1024) {
                if case .text(Self.wakeUpMessage) = message { await onWakeUp() }
            }
        }
    }
}

/// Keeps the wake-up channel open while the engine runs: connects with the device's current
/// credentials, reconnects with backoff, and hands every wake-up on. The backplane's first
/// wake-up comes once the channel is registered, so the sync it starts catches up on what
/// happened while the channel was down and nothing falls in between.
final class WakeUpChannel: Sendable {
    private let session: DeviceSession
    private let retry: RetryPolicy
    private let broadcaster: EventBroadcaster
    private let lifecycle: EngineLifecycle
    private let onWakeUp: @Sendable () -> Void
    private let state = Mutex(State())

    private struct State {
        var task: Task<Void, Never>?
        var connected = false
    }

    init(
        session: DeviceSession, retry: RetryPolicy, broadcaster: EventBroadcaster, lifecycle: EngineLifecycle,
        onWakeUp: @escaping @Sendable () -> Void
    ) {
        self.session = session
        self.retry = retry
        self.broadcaster = broadcaster
        self.lifecycle = lifecycle
        self.onWakeUp = onWakeUp
    }

    var isConnected: Bool {
        state.withLock { $0.connected }
    }

    func start() {
        state.withLock { state in
            guard state.task == nil else { return }
            state.task = Task { [weak self] in await self?.run() }
        }
    }

    /// Closes the channel (the closing is reported as the connection ends).
    func stop() {
        state.withLock { state in
            state.task?.cancel()
            state.task = nil
        }
    }

    private func run() async {
        var failures = 0
        while lifecycle.isRunning, !Task.isCancelled {
            if let credentials = await session.heldCredentials {
                try? await DeviceChannel(api: session.api).run(
                    as: credentials,
                    onOpen: { [weak self] in self?.opened() },
                    onWakeUp: onWakeUp)
                // A channel that was open starts the backoff over.
                failures = closed() ? 1 : failures + 1
            } else {
                failures += 1
            }
            guard lifecycle.isRunning, !Task.isCancelled else { return }
            try? await Task.sleep(for: retry.delay(afterFailures: failures))
        }
    }

    private func opened() {
        state.withLock { $0.connected = true }
        broadcaster.emit(.channelStateChanged(connected: true))
    }

    /// Whether the channel had been open.
    private func closed() -> Bool {
        let wasConnected = state.withLock { state in
            defer { state.connected = false }
            return state.connected
        }
        if wasConnected { broadcaster.emit(.channelStateChanged(connected: false)) }
        return wasConnected
    }
}
