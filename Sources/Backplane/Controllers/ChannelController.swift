import Hummingbird
import BackplaneWire

/// `GET /v1/devices/{deviceId}/channel` upgraded to a WebSocket, authenticated like every device
/// request. The server sends the text frame `sync` once the channel is registered for wake-ups
/// and then whenever something for the device changed; the device answers by syncing. Nothing
/// else travels on it. `WakeUpChannelHandler` serves the channel once the upgrade is done.
struct ChannelController {
    /// The route of the WebSocket router, in a group signed by the device: it accepts the
    /// upgrade for the device the signing middleware proved.
    func addRoutes(to group: RouterGroup<BackplaneRequestContext>) {
        group.get(":deviceId/channel") { _, context -> Response in
            guard let device = context.device else {
                throw ServiceError.invalidCredentials("The channel needs a device's signed request.")
            }
            guard let upgrade = context.channelUpgrade else {
                throw ServiceError.badRequest("This is the device's WebSocket channel: connect with an HTTP Upgrade (websocket) request.")
            }
            upgrade.accept(device)
            return Response(status: .ok)
        }
    }
}
