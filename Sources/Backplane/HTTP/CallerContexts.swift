import Foundation
import Hummingbird
import BackplaneWire

/// Body limit and JSON coding, the same in every context.
protocol WireCodingContext: RequestContext {}

extension WireCodingContext {
    var maxUploadSize: Int { WireLimits.maxBodyBytes }
    var requestDecoder: BackplaneRequestDecoder { BackplaneRequestDecoder() }
    var responseEncoder: JSONEncoder { WireJSON.encoder() }
}

/// Registration: signed with an app key, no device yet.
struct RegistrationRequestContext: ChildRequestContext, WireCodingContext {
    var coreContext: CoreRequestContextStorage
    let applicationId: String
    /// The verified string to sign, which the device proof signs too.
    let stringToSign: String
    /// The connection's peer, for the registration limits.
    let peerAddress: String?

    init(context: BackplaneRequestContext) throws {
        guard case .appKey(let applicationId, let stringToSign)? = context.identity else {
            throw BackplaneError.invalidCredentials("This route needs a request signed with an app key.")
        }
        self.coreContext = context.coreContext
        self.applicationId = applicationId
        self.stringToSign = stringToSign
        self.peerAddress = context.channel?.remoteAddress?.ipAddress
    }
}

/// A device's own routes: signed with an app key and the device credential.
struct DeviceRequestContext: ChildRequestContext, WireCodingContext {
    var coreContext: CoreRequestContextStorage
    let device: AuthenticatedDevice
    /// The request's nonce, on routes whose handler records it in its own transaction; nil where
    /// the middleware recorded it already.
    let nonceToRecord: SignedRequestRecord?
    /// What the credential check read of the device, earlier in this request.
    let read: DeviceRead?

    init(context: BackplaneRequestContext) throws {
        guard case .device(let device, let nonceToRecord, let read)? = context.identity else {
            throw BackplaneError.invalidCredentials("This route needs a device credential.")
        }
        self.coreContext = context.coreContext
        self.device = device
        self.nonceToRecord = nonceToRecord
        self.read = read
    }
}

/// The admin, CMS and reporting routes: a bearer token of the group's scope (checked by its
/// middleware), within the token's application.
struct TokenRequestContext: ChildRequestContext, WireCodingContext {
    var coreContext: CoreRequestContextStorage
    let applicationId: String

    init(context: BackplaneRequestContext) throws {
        guard case .token(let applicationId)? = context.identity else {
            throw BackplaneError.invalidCredentials("This route needs a bearer token.")
        }
        self.coreContext = context.coreContext
        self.applicationId = applicationId
    }
}

/// Route groups by kind of caller: the middleware that proves who is calling, then the context
/// in which that caller is known. Built once per router.
struct CallerGroups {
    let router: Router<BackplaneRequestContext>
    let services: BackplaneServices
    /// Requests per authenticated device (`RateLimits`).
    let deviceLimiter: RateLimiter

    /// Requests signed with an app key only: registration.
    func signedByAppKey(_ path: RouterPath) -> RouterGroup<RegistrationRequestContext> {
        router.group(path)
            .add(middleware: SignedRequestMiddleware(services: services, requireDevice: false, deviceLimiter: deviceLimiter))
            .group(context: RegistrationRequestContext.self)
    }

    /// Requests signed by a device. With `handlerRecordsNonce`, the handler records the nonce in
    /// the same transaction as its own write (`DeviceRequestContext.nonceToRecord`); with
    /// `readsOpenCommands`, the credential check reads the device's open commands with it.
    func signedByDevice(
        _ path: RouterPath, handlerRecordsNonce: Bool = false, readsOpenCommands: Bool = false
    ) -> RouterGroup<DeviceRequestContext> {
        var signing = deviceSigning(handlerRecordsNonce: handlerRecordsNonce)
        signing.readsOpenCommands = readsOpenCommands
        return router.group(path)
            .add(middleware: signing)
            .group(context: DeviceRequestContext.self)
    }

    /// Requests with a bearer token of one scope.
    func bearer(_ path: RouterPath, scope: TokenScope) -> RouterGroup<TokenRequestContext> {
        router.group(path)
            .add(middleware: BearerTokenMiddleware(services: services, scope: scope))
            .group(context: TokenRequestContext.self)
    }

    /// The device-signing middleware alone, for the WebSocket router, whose routes stay in the
    /// root context.
    func deviceSigning(handlerRecordsNonce: Bool = false) -> SignedRequestMiddleware {
        SignedRequestMiddleware(services: services, requireDevice: true, deviceLimiter: deviceLimiter, handlerRecordsNonce: handlerRecordsNonce)
    }
}
