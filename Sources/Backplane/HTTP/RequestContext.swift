import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import Shared

/// Who made the request, as established by the authentication middleware.
public enum Caller: Sendable, Equatable {
    /// A request signed with an app key, before the device has a credential (registration).
    case app(applicationId: String, keyId: String)
    /// A signed request that also carried a valid device credential.
    case device(applicationId: String, keyId: String, deviceId: String)
    /// A bearer token with one scope.
    case token(applicationId: String, scope: TokenScope)

    public var applicationId: String {
        switch self {
        case .app(let id, _), .device(let id, _, _), .token(let id, _): id
        }
    }
}

public struct BackplaneRequestContext: RequestContext, WebSocketRequestContext {
    public var coreContext: CoreRequestContextStorage
    public var caller: Caller?
    /// Set by a signing middleware that leaves recording the nonce to the handler.
    public var signedRequest: SignedRequestRecord?
    /// The verified string to sign of a signed request: what a device proof signs too.
    public var stringToSign: String?
    public let webSocket: WebSocketHandlerReference<Self>
    /// The connection, for what concerns it rather than the request (a refused channel upgrade).
    public let channel: (any Channel)?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
        self.caller = nil
        self.signedRequest = nil
        self.stringToSign = nil
        self.webSocket = .init()
    }

    public var maxUploadSize: Int { WireLimits.maxBodyBytes }
    public var requestDecoder: BackplaneRequestDecoder { BackplaneRequestDecoder() }
    public var responseEncoder: JSONEncoder { WireJSON.encoder() }

    /// The authenticated device; routes behind the device middleware can rely on it.
    func requireDevice() throws -> (applicationId: String, deviceId: String) {
        guard case .device(let applicationId, _, let deviceId) = caller else {
            throw BackplaneError.invalidCredentials("This route needs a device credential.")
        }
        return (applicationId, deviceId)
    }

    func requireApplicationId() throws -> String {
        guard let caller else { throw BackplaneError.invalidCredentials("This route needs credentials.") }
        return caller.applicationId
    }
}

extension Request {
    /// The body decoded, or `empty` when there is none (routes whose body is optional).
    func decode<T: Decodable>(as type: T.Type, context: BackplaneRequestContext, orIfEmpty empty: T) async throws -> T {
        guard try await body.collect(upTo: context.maxUploadSize).readableBytes > 0 else { return empty }
        return try await decode(as: type, context: context)
    }
}

/// Decodes JSON bodies into Shared types and turns every decoding failure into a 400 that says
/// which field was wrong, instead of Hummingbird's generic message.
public struct BackplaneRequestDecoder: RequestDecoder {
    public func decode<T: Decodable>(_ type: T.Type, from request: Request, context: some RequestContext) async throws -> T {
        let buffer = try await request.body.collect(upTo: context.maxUploadSize)
        guard buffer.readableBytes > 0 else { throw BackplaneError.badRequest("A JSON request body is required.") }
        if let key = buffer.withUnsafeReadableBytes(DuplicateJSONKeys.first(in:)) {
            throw BackplaneError.badRequest("The body has the key '\(key)' twice in one object; each key may appear once.")
        }
        do {
            return try WireJSON.decoder().decode(T.self, from: Data(buffer: buffer))
        } catch let error as DecodingError {
            throw BackplaneError.badRequest(DecodingProblem.message(error, subject: "The body"))
        }
    }
}
