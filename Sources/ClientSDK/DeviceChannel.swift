import Foundation
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
        try await WebSocketClient.connect(url: webSocketURL, configuration: configuration, logger: logger) { inbound, _, _ in
            await onOpen()
            for try await message in inbound.messages(maxSize: 1024) {
                if case .text(Self.wakeUpMessage) = message { await onWakeUp() }
            }
        }
    }
}
