import Foundation
import Hummingbird
import HummingbirdWebSocket
import Shared

/// `GET /v1/devices/{deviceId}/channel` upgraded to a WebSocket, authenticated like every device
/// request. The server sends the text frame `sync` whenever something for the device changed;
/// the device answers by syncing. Nothing else travels on it.
struct ChannelController {
    static let wakeUpMessage = "sync"

    let hub: WakeUpHub
    let signedByDevice: SignedRequestMiddleware

    func addRoutes(to router: Router<BackplaneRequestContext>) {
        router.group("v1/devices")
            .add(middleware: signedByDevice)
            .ws(":deviceId/channel") { inbound, outbound, context in
                guard case .device(let applicationId, _, let deviceId) = context.requestContext.caller else { return }
                let subscription = hub.subscribe(applicationId: applicationId, deviceId: deviceId)
                defer { hub.unsubscribe(subscription) }
                let writer = Task {
                    for await _ in subscription.wakeUps {
                        try await outbound.write(.text(Self.wakeUpMessage))
                    }
                }
                defer { writer.cancel() }
                // The device sends nothing but control frames; reading until it closes keeps the
                // channel open and notices when it goes.
                for try await _ in inbound.messages(maxSize: 1024) {}
            }
    }
}
