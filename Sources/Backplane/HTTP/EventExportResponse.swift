import Hummingbird
import NIOCore
import BackplaneWire

extension Response {
    /// An event export, streamed a page at a time, for the reporting API and the console. The
    /// filter is checked before the first byte, so a refusal is still an error answer.
    static func eventExport(_ events: EventService, applicationId: String, filter: EventFilter, format: EventExportFormat) throws -> Response {
        try EventService.validate(filter)
        var headers = HTTPFields()
        headers[.contentType] = format.contentType
        headers[.contentDisposition] = "attachment; filename=\"events.\(format.rawValue)\""
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            try await events.export(applicationId: applicationId, filter: filter, format: format) { bytes in
                try await writer.write(ByteBuffer(bytes: bytes))
            }
            try await writer.finish(nil)
        })
    }
}
