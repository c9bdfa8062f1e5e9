import Foundation
import Hummingbird
import NIOCore
import Shared

/// `POST /v1/events`: a device uploads a batch of its events (signed, with the device credential).
struct EventsController {
    let events: EventService
    let signedByDevice: SignedRequestMiddleware

    func addRoutes(to router: Router<BackplaneRequestContext>) {
        router.group("v1/events")
            .add(middleware: signedByDevice.recordingNonceInHandler())
            .post(use: upload)
    }

    @Sendable func upload(_ request: Request, context: BackplaneRequestContext) async throws -> EventBatchResponse {
        let me = try context.requireDevice()
        let batch = try await request.decode(as: ReceivedEventBatch.self, context: context)
        return try await events.ingest(applicationId: me.applicationId, deviceId: me.deviceId, batch, signedRequest: context.signedRequest)
    }
}
