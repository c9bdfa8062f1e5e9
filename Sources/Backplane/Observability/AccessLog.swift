import Foundation
import Hummingbird
import Logging
import Synchronization
import BackplaneWire

/// What inner middleware learns of a request that the access line reports: who made it (set
/// with the context's identity) and the error code of a refusal. The router hands each middleware
/// a copy of the context, so the outermost one reads these through this shared object.
final class AccessRecord: Sendable {
    struct Fields {
        var applicationId: String?
        var deviceId: String?
        var errorCode: ErrorCode?
    }

    private let fields = Mutex(Fields())

    var current: Fields { fields.withLock { $0 } }

    func record(_ identity: Identity?) {
        fields.withLock { fields in
            switch identity {
            case .appKey(let applicationId, _, _, _)?, .token(let applicationId)?:
                fields.applicationId = applicationId
            case .device(let signed, _)?:
                fields.applicationId = signed.device.applicationId
                fields.deviceId = signed.device.deviceId
            case .browser(let session)?:
                fields.applicationId = session.applicationId
            case nil:
                break
            }
        }
    }

    func record(_ code: ErrorCode) { fields.withLock { $0.errorCode = code } }
}

/// Outermost middleware: one `info` line per answered request, and the request metrics. The line
/// names the method, the route's pattern, the status, the duration, the request id, and the
/// application and device the request proved (never a credential); a refusal adds its error code.
struct AccessLogMiddleware: RouterMiddleware {
    typealias Context = BackplaneRequestContext
    /// Nil: metrics only.
    let logger: Logger?
    let metrics: BackplaneMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        var context = context
        // A proxy's id for the request (nginx's $request_id) becomes the backplane's: one id in
        // the proxy's log, this access line, the X-Request-Id answer and any error body.
        if let given = request.headers[ErrorMiddleware<Context>.requestIdHeader], Self.isUsableRequestId(given) {
            context.logger[metadataKey: "hb.request.id"] = .string(given)
        }
        do {
            let response = try await next(request, context)
            // A channel the WebSocket router accepts is upgraded next: 101, as the device sees it.
            let status = context.channelUpgrade?.acceptedDevice != nil ? 101 : response.status.code
            record(request, context, status: status, since: start)
            return response
        } catch {
            // Only the WebSocket router's refusals arrive here; `ErrorMiddleware` answers the others.
            let refusal = ErrorMiddleware<Context>.map(error, requestId: context.id)
            context.access.record(refusal.code)
            record(request, context, status: refusal.status.code, since: start)
            throw error
        }
    }

    private func record(_ request: Request, _ context: Context, status: Int, since start: ContinuousClock.Instant) {
        let duration = ContinuousClock.now - start
        // A path no route matched is reported as such: one series, however many paths are tried.
        let route = context.endpointPath ?? "unmatched"
        metrics.request(route: route, method: request.method.rawValue, status: status, duration: duration)
        guard let logger, logger.logLevel <= .info else { return }
        let fields = context.access.current
        var metadata: Logger.Metadata = [
            "method": "\(request.method.rawValue)",
            "route": "\(route)",
            "status": "\(status)",
            "duration_ms": "\(Self.milliseconds(duration))",
            "request_id": "\(context.id)",
        ]
        if let applicationId = fields.applicationId { metadata["app"] = "\(applicationId)" }
        if let deviceId = fields.deviceId { metadata["device"] = "\(deviceId)" }
        if let code = fields.errorCode { metadata["code"] = "\(code.rawValue)" }
        logger.info("request", metadata: metadata)
    }

    /// Up to 64 letters, digits, '-', '_' and '.': an id that cannot forge a log line or a header.
    static func isUsableRequestId(_ id: String) -> Bool {
        (1...64).contains(id.utf8.count)
            && id.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
                    || byte == UInt8(ascii: ".")
            }
    }

    /// Milliseconds with two decimals.
    static func milliseconds(_ duration: Duration) -> String {
        String(format: "%.2f", Double(duration.nanoseconds) / 1_000_000)
    }
}
