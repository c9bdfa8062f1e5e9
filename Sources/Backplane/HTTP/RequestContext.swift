import Foundation
import Hummingbird
import NIOCore
import Synchronization
import BackplaneWire

/// What an authentication middleware proved about a request. The route group's own context
/// (`CallerContexts.swift`) turns it into a caller that is not optional.
enum Identity: Sendable {
    /// Signed with an app key, before the device has a credential (registration).
    /// `stringToSign` is the verified string, which a device proof signs too.
    case appKey(applicationId: String, stringToSign: String)
    /// Signed with an app key and carrying a valid device credential. `nonceToRecord` is set when
    /// the route's handler records the nonce in its own transaction; `read` is what the
    /// credential check read, which a quiet sync answers from instead of reading it again.
    case device(AuthenticatedDevice, nonceToRecord: SignedRequestRecord?, read: DeviceRead?)
    /// A bearer token of the scope the route's group requires.
    case token(applicationId: String)
    /// A console session: the token in its cookie, of any scope (pages check theirs).
    case console(ConsoleSession)
}

/// What the credential check read of the device, earlier in the request.
struct DeviceRead: Sendable {
    let record: DeviceRecord
    /// Its open commands, read with it on the routes that ask for them (the sync).
    let openCommands: [CommandRecord]?
}

/// The device that signed a request with its credential; it may act only on itself.
struct AuthenticatedDevice: Sendable, Equatable {
    let applicationId: String
    let deviceId: String
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

    /// The signing device, on routes behind the device-signing middleware.
    var device: AuthenticatedDevice? {
        guard case .device(let device, _, _) = identity else { return nil }
        return device
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
