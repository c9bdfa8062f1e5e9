import Foundation
import Hummingbird
import HummingbirdWebSocket
import BackplaneWire

/// `GET /v1/devices/{deviceId}/channel` upgraded to a WebSocket, authenticated like every device
/// request. The server sends the text frame `sync` once the channel is registered for wake-ups
/// and then whenever something for the device changed; the device answers by syncing. Nothing
/// else travels on it.
struct ChannelController {
    static let wakeUpMessage = "sync"

    let hub: WakeUpHub

    /// The hub's handle on one connection: writes the wake-up frame.
    struct Channel: WakeUpChannel {
        let outbound: WebSocketOutboundWriter

        func wake() async {
            try? await outbound.write(.text(ChannelController.wakeUpMessage))
        }
    }

    /// Routes under `/v1/devices`, in a group signed by the device. A WebSocket route keeps the
    /// root context (hummingbird-websocket builds it from the connection), so the device is read
    /// from what the signing middleware proved.
    func addRoutes(to group: RouterGroup<BackplaneRequestContext>) {
        group
            .ws(":deviceId/channel") { inbound, outbound, context in
                guard let device = context.requestContext.device else { return }
                let channel = Channel(outbound: outbound)
                let registration = hub.register(channel, applicationId: device.applicationId, deviceId: device.deviceId)
                defer { hub.unregister(registration) }
                // A first wake-up now, not on the device's own "connected": a change committed
                // between the device's catch-up sync and this registration would wake nobody.
                await channel.wake()
                // The device sends nothing but control frames; reading until it closes keeps the
                // channel open and notices when it goes.
                for try await _ in inbound.messages(maxSize: 1024) {}
            }
    }
}
