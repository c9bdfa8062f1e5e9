import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import BackplaneWire

/// Outermost middleware: gives every response an `X-Request-Id`, renders every error with the
/// error body (`ErrorBody` in BackplaneWire), and logs anything unexpected as the bug it is.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    static var requestIdHeader: HTTPField.Name { HTTPField.Name("X-Request-Id")! }

    /// Turns the router's "no such route" into 405 for a path served with other methods.
    var allowedMethods: AllowedMethods?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        do {
            response = try await next(request, context)
        } catch {
            var mapped = Self.map(error, requestId: context.id)
            if mapped.status == .notFound, !(error is BackplaneError), !(error is ServiceError),
               let allowed = allowedMethods?.methods(for: request.uri.path), !allowed.isEmpty {
                mapped = .methodNotAllowed(request.method.rawValue, allowed: allowed)
            }
            if error is StoreUnavailableError || mapped.status == .serviceUnavailable {
                // An outage (of the database, or of what a service fetches), logged as one: not
                // a bug. The store's own log says what broke.
                context.logger.warning("Unavailable", metadata: ["error": "\(error)"])
            } else if mapped.status.code >= 500 {
                context.logger.error("Unhandled error", metadata: ["error": "\(String(reflecting: error))"])
            } else {
                context.logger.debug("Request refused", metadata: ["error": "\(mapped)"])
            }
            (context as? BackplaneRequestContext)?.access.record(mapped.code)
            response = try mapped.response(from: request, context: context)
        }
        response.headers[Self.requestIdHeader] = context.id
        return response
    }

    static func map(_ error: any Error, requestId: String) -> BackplaneError {
        switch error {
        case let error as ServiceError:
            return BackplaneError(error)
        case let error as BackplaneError:
            return error
        case is StoreUnavailableError:
            return BackplaneError(.storeUnavailable)
        case StoreError.unstorableValue(let reason):
            return BackplaneError(.badRequest(reason))
        case is NIOTooManyBytesError:
            return BackplaneError(.payloadTooLarge(limit: WireLimits.maxBodyBytes))
        case let error as HTTPError:
            return BackplaneError(error.status, code(for: error.status), error.body ?? message(for: error.status))
        case let error as any HTTPResponseError where error.status.code < 500:
            return BackplaneError(error.status, code(for: error.status), message(for: error.status))
        default:
            return .internalError(requestId: requestId)
        }
    }

    private static func code(for status: HTTPResponse.Status) -> ErrorCode {
        switch status.code {
        case 401: .invalidCredentials
        case 403: .forbidden
        case 404: .notFound
        case 405: .methodNotAllowed
        case 409: .conflict
        case 413: .payloadTooLarge
        case 500...: .internalError
        default: .badRequest
        }
    }

    private static func message(for status: HTTPResponse.Status) -> String {
        status.code == 404 ? "No such route." : status.reasonPhrase
    }
}

extension ErrorCode {
    /// The one table from a refusal's code to its HTTP status: every `ServiceError` is answered
    /// with the status its code has here.
    var httpStatus: HTTPResponse.Status {
        switch self {
        case .badRequest, .validationFailed: .badRequest
        case .payloadTooLarge: .contentTooLarge
        case .headersTooLarge: .requestHeaderFieldsTooLarge
        case .invalidCredentials, .invalidSignature, .staleTimestamp, .nonceReused, .userTokenRequired, .userTokenInvalid: .unauthorized
        case .forbidden, .deviceUnregistered, .userTokenMismatch, .licenseDenied: .forbidden
        case .notFound: .notFound
        case .deviceAlreadyRegistered, .deviceLimitReached, .downloadLimitReached, .downloadNotEnabled, .conflict: .conflict
        case .methodNotAllowed: .methodNotAllowed
        case .rateLimited: .tooManyRequests
        case .serviceUnavailable: .serviceUnavailable
        case .licenseServerFailed: .badGateway
        case .internalError: .internalServerError
        // (Every code this server sends is listed above; a later release's is its own.)
        default: .internalServerError
        }
    }
}
