import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket

/// The backplane's child channel: Hummingbird's HTTP/1 server, with the first request of a
/// connection allowed to upgrade it to a device's wake-up channel (a WebSocket). An
/// `UpgradeRequestFilter` sits in front of the upgrade handler and a `ConnectionGuard` after it,
/// where it sees every request of the connection from the first (Hummingbird adds its own idle
/// handling only after the first request head, and never answers a head that overflows the
/// decoder).
///
/// The upgrade is decided by the WebSocket router (`buildWebSocketRouter`): its middleware
/// checks the signature and credential, and its route accepts the device. An upgraded
/// connection is then served by `WakeUpChannelHandler` alone: its task ends with the upgrade.
struct GuardedHTTPChannel: ServerChildChannel, HTTPChannelHandler {
    enum UpgradeResult: Sendable {
        /// A device's wake-up channel now, served by the pipeline's handlers.
        case wakeUpChannel
        case notUpgraded(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
        /// An upgrade the router refused: answered 400, which `ConnectionGuard` replaces with
        /// the refusal's status and error body.
        case failedUpgrade(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
    }

    struct Value: ServerChildChannelValue {
        let upgradeResult: EventLoopFuture<UpgradeResult>
        let channel: any Channel
    }

    typealias UpgradeDecision = @Sendable (Request, BackplaneRequestContext) async throws -> Response

    let responder: HTTPChannelHandler.Responder
    let decideUpgrade: UpgradeDecision
    let hub: WakeUpHub
    let limits: TransportLimits
    let pingInterval: Duration?

    init(responder: @escaping HTTPChannelHandler.Responder, decideUpgrade: @escaping UpgradeDecision, hub: WakeUpHub, limits: TransportLimits, pingInterval: Duration?) {
        self.responder = Self.refusingLateUpgrades(responder)
        self.decideUpgrade = decideUpgrade
        self.hub = hub
        self.limits = limits
        self.pingInterval = pingInterval
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let upgradeAttempted = NIOLoopBoundBox(false, eventLoop: channel.eventLoop)
            // Handed from the decision to the pipeline set-up; both run for this connection only.
            let accepted = NIOLockedValueBox<AuthenticatedDevice?>(nil)
            let upgrader = NIOTypedWebSocketServerUpgrader<UpgradeResult>(
                maxFrameSize: Self.maxFrameSize,
                shouldUpgrade: { channel, head in
                    upgradeAttempted.value = true
                    let promise = channel.eventLoop.makePromise(of: HTTPHeaders?.self)
                    promise.completeWithTask {
                        guard let device = try await decide(head, channel: channel, logger: logger) else { return nil }
                        accepted.withLockedValue { $0 = device }
                        return HTTPHeaders()
                    }
                    return promise.futureResult
                },
                upgradePipelineHandler: { channel, _ in
                    channel.eventLoop.makeCompletedFuture {
                        guard let device = accepted.withLockedValue({ $0 }) else { throw ChannelError.inappropriateOperationForState }
                        try channel.pipeline.syncOperations.addHandler(
                            WakeUpChannelHandler(device: device, hub: hub, pingInterval: pingInterval.map(TimeAmount.init)))
                        return .wakeUpChannel
                    }
                })
            let notUpgrading = NIOTypedHTTPServerUpgradeConfiguration(
                upgraders: [upgrader],
                notUpgradingCompletionHandler: { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                        // No idle timeout of Hummingbird's own: `ConnectionGuard` times the
                        // connection, and knows that an upgrade waiting for the router's
                        // decision is not idle.
                        try channel.pipeline.syncOperations.addHandler(HTTPConnectionStateHandler(idleTimeout: nil, logger: logger))
                        let http = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
                            wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
                        return upgradeAttempted.value ? .failedUpgrade(http) : .notUpgraded(http)
                    }
                })
            var configuration = NIOUpgradableHTTPServerPipelineConfiguration<UpgradeResult>(upgradeConfiguration: notUpgrading)
            configuration.enablePipelining = false  // NIOAsyncChannel reads one request at a time
            configuration.enableErrorHandling = false  // `ConnectionGuard` answers parser errors
            configuration.enableResponseHeaderValidation = false  // HTTPTypes validated them already
            configuration.decoderConfiguration.maxHeaderFieldSize = limits.maxHeaderBytes
            configuration.decoderConfiguration.maxHeaderListSize = limits.maxHeaderBytes
            configuration.decoderConfiguration.maxHeaderFieldCount = limits.maxHeaderFields
            let upgradeResult = try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(configuration: configuration)
            try UpgradeRequestFilter.install(in: channel.pipeline.syncOperations)
            try channel.pipeline.syncOperations.addHandler(ConnectionGuard(limits: limits))
            return Value(upgradeResult: upgradeResult, channel: channel)
        }
    }

    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.upgradeResult.get() {
            case .notUpgraded(let http):
                await handleHTTP(asyncChannel: http, logger: logger)
            case .failedUpgrade(let http):
                await Self.refuse(http)
            case .wakeUpChannel:
                break  // `WakeUpChannelHandler` has the connection from here.
            }
        } catch {
            logger.debug("Connection ended before its first request was handled", metadata: ["error": "\(error)"])
        }
    }

    /// The largest frame a device may send on its channel (it sends only control frames).
    static let maxFrameSize = 1024

    /// Runs the WebSocket router on the upgrade request: the device it accepts, or nil.
    private func decide(_ head: HTTPRequestHead, channel: any Channel, logger: Logger) async throws -> AuthenticatedDevice? {
        let request = Request(head: try HTTPRequest(head, secure: false, splitCookie: false), body: .init(buffer: ByteBuffer()))
        var logger = logger
        // Every request has an id (error bodies carry it); Hummingbird gives one to the requests
        // it runs itself.
        logger[metadataKey: "hb.request.id"] = .stringConvertible(RequestID())
        let upgrade = ChannelUpgrade()
        let context = BackplaneRequestContext(source: .init(channel: channel, logger: logger), channelUpgrade: upgrade)
        do {
            let response = try await decideUpgrade(request, context)
            guard response.status == .ok else { return nil }
            return upgrade.acceptedDevice
        } catch {
            return nil  // `UpgradeRefusalMiddleware` has recorded the answer.
        }
    }

    private static func refuse(_ http: NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>) async {
        try? await http.executeThenClose { _, outbound in
            let head = HTTPResponse(status: .badRequest, headerFields: [.connection: "close", .contentLength: "0"])
            try await outbound.write(contentsOf: [.head(head), .end(nil)])
        }
    }

    /// Only a connection's first request can upgrade it. A later one that asks to is sent to
    /// open a new connection for it (307 to the same path, and this connection closes).
    private static func refusingLateUpgrades(_ responder: @escaping HTTPChannelHandler.Responder) -> HTTPChannelHandler.Responder {
        struct ClosingAfterRedirect: Error {}
        return { request, responseWriter, channel in
            guard request.headers[.upgrade]?.lowercased() == "websocket" else {
                return try await responder(request, responseWriter, channel)
            }
            let location = request.uri.query.map { "\(request.uri.path)?\($0)" } ?? request.uri.path
            try await responseWriter.writeResponse(
                HTTPResponse(status: .temporaryRedirect, headerFields: [.connection: "close", .location: location]))
            throw ClosingAfterRedirect()
        }
    }
}

extension HTTPServerBuilder {
    /// HTTP/1 with the upgrade to device channels decided by `webSocketRouter`, behind
    /// `ConnectionGuard`.
    static func guardedHTTP1WithWakeUpChannels(
        webSocketRouter: Router<BackplaneRequestContext>, hub: WakeUpHub, limits: TransportLimits, pingInterval: Duration?
    ) -> HTTPServerBuilder {
        let webSocketResponder = webSocketRouter.buildResponder()
        return HTTPServerBuilder { responder in
            GuardedHTTPChannel(
                responder: responder, decideUpgrade: { try await webSocketResponder.respond(to: $0, context: $1) },
                hub: hub, limits: limits, pingInterval: pingInterval)
        }
    }
}
