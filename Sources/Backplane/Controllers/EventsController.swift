import Foundation
import Hummingbird
import NIOCore
import BackplaneWire

/// `POST /v1/events`: a device uploads a batch of its events (signed, with the device credential).
struct EventsController {
    let events: EventService

    /// In a group that leaves the nonce to the upload, which spends it with the events, in one transaction.
    func addRoutes(to group: RouterGroup<SignedDeviceRequestContext>) {
        group.post(use: upload)
    }

    @Sendable func upload(_ request: Request, context: SignedDeviceRequestContext) async throws -> EventBatchResponse {
        let batch = try await request.decode(as: ReceivedEventBatch.self, context: context)
        return try await events.ingest(context.signed, batch)
    }
}
