import Foundation
import Hummingbird
import NIOCore
import Synchronization
import BackplaneWire

/// What an authentication middleware proved about a request. The route group's own context
/// (`CallerContexts.swift`) turns it into a caller that is not optional.
enum Identity: Sendable {
    /// Signed with an app key, before the device has a credential (registration).
    /// `stringToSign` is the verified string, which a device proof signs too. `spent`: the
    /// nonce is spent (`SpendNonceMiddleware`).
    case appKey(applicationId: String, stringToSign: String, nonce: SignedRequestRecord, spent: Bool)
    /// Signed with an app key and carrying a valid device credential; `spent`: its nonce is spent
    /// already (`SpendNonceMiddleware`), or left to the route's service.
    case device(SignedRequest, spent: Bool)
    /// A bearer token of the scope the route's group requires.
    case token(applicationId: String)
    /// A browser session: the token in its cookie, of any scope (pages check theirs).
    case browser(BrowserSession)
}

extension Identity {
    /// A signed request's nonce, spent or not; nil for other callers.
    var signedNonce: SignedRequestRecord? {
        switch self {
        case .appKey(_, _, let nonce, _): nonce
        case .device(let signed, _): signed.nonce
        case .token, .browser: nil
        }
    }
}

/// A browser signed in with a bearer token kept in a cookie (the console's session): the token's
/// application, scope and name, and the form token its pages carry. Nothing is kept on the
/// server: every request presents the cookie and the token is checked as an API request's would
/// be (`ApplicationService.authenticate`), so a revoked or expired token ends its sessions at
/// once, on every node.
struct BrowserSession: Sendable {
    let applicationId: String
    let scope: TokenScope
    let tokenName: String
    /// The form token every state-changing form carries (`ConsoleSecurity.formToken`).
    let formToken: String

    /// Throws the console's 403 unless the session's token has `scope`.
    func require(_ scope: TokenScope, toDo action: String) throws {
        guard self.scope == scope else {
            throw ServiceError.forbidden(
                "\(action) needs a token of scope '\(scope.rawValue)'; you signed in with a '\(self.scope.rawValue)' token.")
        }
    }
}

/// Where the channel route leaves the device whose upgrade it accepts, for `GuardedHTTPChannel`
/// to read after the router has answered (the context itself is a value the router copies).
final class ChannelUpgrade: Sendable {
    private let accepted = Mutex<AuthenticatedDevice?>(nil)

    func accept(_ device: AuthenticatedDevice) { accepted.withLock { $0 = device } }
    var acceptedDevice: AuthenticatedDevice? { accepted.withLock { $0 } }
}

/// The context every request starts in, built by Hummingbird from the connection. Routes with a
/// caller run in a child context instead (`CallerContexts.swift`). Here stay the health checks
/// (no caller) and the upgrade to a wake-up channel, which `GuardedHTTPChannel` runs through the
/// WebSocket router in this context.
public struct BackplaneRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// Set by the authentication middleware of the route's group.
    var identity: Identity? {
        didSet { access.record(identity) }
    }
    /// What the access line reports of this request (`AccessLogMiddleware`).
    let access = AccessRecord()
    /// Only on the upgrade requests `GuardedHTTPChannel` runs: other requests allocate none.
    let channelUpgrade: ChannelUpgrade?
    /// The connection, for what concerns it rather than the request (a refused channel upgrade).
    public let channel: (any Channel)?

    public init(source: ApplicationRequestContextSource) {
        self.init(source: source, channelUpgrade: nil)
    }

    init(source: ApplicationRequestContextSource, channelUpgrade: ChannelUpgrade?) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
        self.identity = nil
        self.channelUpgrade = channelUpgrade
    }

    public var maxUploadSize: Int { WireLimits.maxBodyBytes }
    public var requestDecoder: BackplaneRequestDecoder { BackplaneRequestDecoder() }
    public var responseEncoder: JSONEncoder { WireJSON.encoder() }

    /// The signing device, once its request's nonce is spent.
    var device: AuthenticatedDevice? {
        guard case .device(let signed, spent: true) = identity else { return nil }
        return signed.device
    }
}

extension Request {
    /// The body decoded, or `empty` when there is none (routes whose body is optional).
    func decode<T: Decodable>(as type: T.Type, context: some RequestContext, orIfEmpty empty: T) async throws -> T {
        guard try await body.collect(upTo: context.maxUploadSize).readableBytes > 0 else { return empty }
        return try await decode(as: type, context: context)
    }
}

/// Decodes JSON bodies into BackplaneWire types and turns every decoding failure into a 400 that says
/// which field was wrong, instead of Hummingbird's generic message.
public struct BackplaneRequestDecoder: RequestDecoder {
    public func decode<T: Decodable>(_ type: T.Type, from request: Request, context: some RequestContext) async throws -> T {
        let buffer = try await request.body.collect(upTo: context.maxUploadSize)
        guard buffer.readableBytes > 0 else { throw ServiceError.badRequest("A JSON request body is required.") }
        if let key = buffer.withUnsafeReadableBytes(DuplicateJSONKeys.first(in:)) {
            throw ServiceError.badRequest("The body has the key '\(key)' twice in one object; each key may appear once.")
        }
        do {
            let decoder = WireJSON.decoder()
            // What a client sends must be a value this server knows (a 400 naming the field
            // otherwise); only clients accept values a later release adds.
            decoder.userInfo[WireVocabularyDecoding.knownValuesOnly] = true
            return try decoder.decode(T.self, from: Data(buffer: buffer))
        } catch let error as DecodingError {
            throw ServiceError.badRequest(DecodingProblem.message(error, subject: "The body"))
        }
    }
}
