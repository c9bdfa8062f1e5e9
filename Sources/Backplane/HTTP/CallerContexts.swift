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
        guard case .appKey(let applicationId, let stringToSign, _, spent: true)? = context.identity else {
            throw ServiceError.invalidCredentials("This route needs a request signed with an app key.")
        }
        self.coreContext = context.coreContext
        self.applicationId = applicationId
        self.stringToSign = stringToSign
        self.peerAddress = context.channel?.remoteAddress?.ipAddress
    }
}

/// A device's own routes: signed with an app key and the device credential, the nonce spent
/// before the handler runs.
struct DeviceRequestContext: ChildRequestContext, WireCodingContext {
    var coreContext: CoreRequestContextStorage
    let device: AuthenticatedDevice

    init(context: BackplaneRequestContext) throws {
        guard case .device(let signed, spent: true)? = context.identity else {
            throw ServiceError.invalidCredentials("This route needs a device credential.")
        }
        self.coreContext = context.coreContext
        self.device = signed.device
    }
}

/// A device's routes whose service spends the nonce in its own write (the sync, an event
/// upload): one commit for the request instead of two. The handler hands `signed` on.
struct SignedDeviceRequestContext: ChildRequestContext, WireCodingContext {
    var coreContext: CoreRequestContextStorage
    let signed: SignedRequest

    init(context: BackplaneRequestContext) throws {
        guard case .device(let signed, spent: false)? = context.identity else {
            throw ServiceError.invalidCredentials("This route needs a device credential.")
        }
        self.coreContext = context.coreContext
        self.signed = signed
    }
}

/// The admin, CMS and reporting routes: a bearer token of the group's scope (checked by its
/// middleware), within the token's application.
struct TokenRequestContext: ChildRequestContext, WireCodingContext {
    var coreContext: CoreRequestContextStorage
    let applicationId: String

    init(context: BackplaneRequestContext) throws {
        guard case .token(let applicationId)? = context.identity else {
            throw ServiceError.invalidCredentials("This route needs a bearer token.")
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
            .add(middleware: SpendNonceMiddleware(services: services))
            .group(context: RegistrationRequestContext.self)
    }

    /// Requests signed by a device, their nonce spent before the handler.
    func signedByDevice(_ path: RouterPath) -> RouterGroup<DeviceRequestContext> {
        router.group(path)
            .add(middleware: deviceSignIn)
            .add(middleware: SpendNonceMiddleware(services: services))
            .group(context: DeviceRequestContext.self)
    }

    /// Requests signed by a device whose service spends the nonce in its own write.
    func signedByDeviceSpentByService(_ path: RouterPath) -> RouterGroup<SignedDeviceRequestContext> {
        router.group(path)
            .add(middleware: deviceSignIn)
            .group(context: SignedDeviceRequestContext.self)
    }

    /// Requests with a bearer token of one scope.
    func bearer(_ path: RouterPath, scope: TokenScope) -> RouterGroup<TokenRequestContext> {
        router.group(path)
            .add(middleware: BearerTokenMiddleware(services: services, scope: scope))
            .group(context: TokenRequestContext.self)
    }

    /// The WebSocket router's channel routes, which stay in the root context: signed by the
    /// device, the nonce spent before the upgrade is accepted.
    func signedByDeviceInRootContext(_ path: RouterPath) -> RouterGroup<BackplaneRequestContext> {
        router.group(path)
            .add(middleware: deviceSignIn)
            .add(middleware: SpendNonceMiddleware(services: services))
    }

    private var deviceSignIn: SignedRequestMiddleware {
        SignedRequestMiddleware(services: services, requireDevice: true, deviceLimiter: deviceLimiter)
    }
}
