import Foundation
import Hummingbird
import NIOCore
import BackplaneWire

/// `POST /v1/events`: a device uploads a batch of its events (signed, with the device credential).
struct EventsController {
    let events: EventService

    /// In a group signed by the device whose handler records the nonce: with the events, in one transaction.
    func addRoutes(to group: RouterGroup<DeviceRequestContext>) {
        group.post(use: upload)
    }

    @Sendable func upload(_ request: Request, context: DeviceRequestContext) async throws -> EventBatchResponse {
        let me = context.device
        let batch = try await request.decode(as: ReceivedEventBatch.self, context: context)
        return try await events.ingest(applicationId: me.applicationId, deviceId: me.deviceId, batch, signedRequest: context.nonceToRecord)
    }
}
