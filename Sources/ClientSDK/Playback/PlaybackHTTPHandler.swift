import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// One loopback connection of the playback server, after NIO's HTTP/1.1 decoder and its
/// pipelining helper (which holds a kept-alive connection's next request until this answer
/// ends). Answers `GET` and `HEAD` under the run's token, for a `Host` of the loopback
/// (`LoopbackHost`); a file goes out as a `FileRegion` (sendfile where the system has it), so
/// memory does not grow with the file. `PlaybackConnectionGuard`, before it, times the connection.
final class PlaybackHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let token: String
    private let library: any PlaybackLibrary
    private let origins: OriginPassThrough
    private var head: HTTPRequestHead?
    /// A license request's body (`POST`), up to `ClearKeyLicenseAnswer.maxRequestBytes`.
    private var body: ByteBuffer?
    private var bodyTooLarge = false

    init(token: String, library: any PlaybackLibrary, origins: OriginPassThrough) {
        self.token = token
        self.library = library
        self.origins = origins
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = nil
            bodyTooLarge = false
        case .body(var part):
            // Only a license request has a body; a media request's is not read.
            guard head?.method == .POST, !bodyTooLarge else { break }
            if (body?.readableBytes ?? 0) + part.readableBytes > ClearKeyLicenseAnswer.maxRequestBytes {
                bodyTooLarge = true
                body = nil
            } else if body == nil {
                body = part
            } else {
                body!.writeBuffer(&part)
            }
        case .end:
            guard let head else { return }
            self.head = nil
            if head.method == .POST {
                let received = body.map { Data($0.readableBytesView) } ?? Data()
                body = nil
                return respondToLicenseRequest(head, body: received, tooLarge: bodyTooLarge, context: context)
            }
            respond(to: head, context: context)
        }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        // Before anything else: a page that rebound its domain to 127.0.0.1 learns nothing more.
        switch LoopbackHost(head, port: context.channel.localAddress?.port) {
        case .accepted:
            break
        case .invalid:
            return sendText(.badRequest, "One Host header is required.", head: head, context: context, closing: true)
        case .foreign:
            return sendText(
                .misdirectedRequest, "This server answers only for 127.0.0.1 and localhost on its own port.", head: head, context: context,
                closing: true)
        }
        if head.method == .OPTIONS, PlaybackPath.carriesToken(head.uri, token: token) {
            // A web view's preflight (a Range header, a typed license request): what may follow.
            var headers = HTTPHeaders()
            headers.add(name: "Access-Control-Allow-Methods", value: "GET, HEAD, POST")
            headers.add(name: "Access-Control-Allow-Headers", value: "Range, Content-Type")
            headers.add(name: "Access-Control-Max-Age", value: "600")
            return send(.noContent, ByteBuffer(), extra: headers, head: head, context: context)
        }
        guard head.method == .GET || head.method == .HEAD else {
            var headers = HTTPHeaders()
            headers.add(name: "Allow", value: "GET, HEAD")
            return sendText(
                .methodNotAllowed, "Only GET and HEAD are served.", extra: headers, head: head, context: context,
                closing: !PlaybackPath.carriesToken(head.uri, token: token))
        }
        guard let target = PlaybackPath(uri: head.uri, token: token) else {
            // The same answer for a wrong token as for a missing file: nothing to learn by guessing.
            // A stranger's connection is closed after it: one that sent requests back to back
            // and read none of the answers would otherwise pile them up in memory.
            return sendText(.notFound, "Not found.", head: head, context: context, closing: !PlaybackPath.carriesToken(head.uri, token: token))
        }
        let library = library, origins = origins
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let boundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        let range = head.headers.first(name: "range")
        let work: @Sendable () async -> Void = {
            let prepared = await Self.prepare(target, with: library, origins: origins, range: range, method: head.method)
            // The body of a file still at its origin is passed on as it arrives.
            let answered = loop.submit { handler.value.finish(prepared, range: range, head: head, context: boundContext.value) }
            guard let relay = try? await answered.get() else { return }
            await relay.run()
        }
        Task(operation: work)
    }

    /// `POST /<token>/<asset>/clearkey-license`: the asset's keys for an EME player, at the door of its rights.
    private func respondToLicenseRequest(_ head: HTTPRequestHead, body: Data, tooLarge: Bool, context: ChannelHandlerContext) {
        guard case .accepted = LoopbackHost(head, port: context.channel.localAddress?.port) else {
            return sendText(.misdirectedRequest, "This server answers only for 127.0.0.1 and localhost on its own port.", head: head,
                            context: context, closing: true)
        }
        guard let target = PlaybackPath(uri: head.uri, token: token), target.relativePath == ClearKeyLicenseAnswer.path else {
            var headers = HTTPHeaders()
            headers.add(name: "Allow", value: "GET, HEAD")
            return sendText(
                .methodNotAllowed, "Only GET and HEAD are served, and POST for a license.", extra: headers, head: head, context: context,
                closing: !PlaybackPath.carriesToken(head.uri, token: token))
        }
        guard !tooLarge else {
            return sendText(.payloadTooLarge, "A license request is at most \(ClearKeyLicenseAnswer.maxRequestBytes) bytes.", head: head,
                            context: context, closing: true)
        }
        let library = library
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let boundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        Task {
            let answer = await library.clearKeyLicense(assetId: target.assetId, request: body)
            loop.execute { handler.value.finishLicense(answer, head: head, context: boundContext.value) }
        }
    }

    private func finishLicense(_ answer: PlaybackAnswer, head: HTTPRequestHead, context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        switch answer {
        case .text(let text, let contentType): sendText(.ok, text, contentType: contentType, head: head, context: context)
        case .refused(let status, let reason): sendText(HTTPResponseStatus(statusCode: status), reason, head: head, context: context)
        case .file, .origin, .bytes: sendText(.notFound, "Not found.", head: head, context: context)
        }
    }

    /// The library's answer and, for a file, the file opened with its size, or, for a file at
    /// its origin, the origin's answer: off the event loop.
    private struct Prepared: Sendable {
        var answer: PlaybackAnswer
        var file: OpenedFile?
        var origin: OriginPassThrough.Outcome?
    }

    private struct OpenedFile: Sendable {
        var handle: NIOFileHandle
        var size: Int64
    }

    private static func prepare(
        _ target: PlaybackPath, with library: any PlaybackLibrary, origins: OriginPassThrough, range: String?, method: HTTPMethod
    ) async -> Prepared {
        let answer = await library.answer(assetId: target.assetId, relativePath: target.relativePath)
        switch answer {
        case .file(let path, _):
            return Prepared(answer: answer, file: try? open(path))
        case .origin(let file, _):
            let outcome = await origins.open(file, range: range, method: method)
            if case .relay = outcome { library.servedFromOrigin(assetId: target.assetId, relativePath: target.relativePath) }
            return Prepared(answer: answer, origin: outcome)
        case .text, .bytes, .refused:
            return Prepared(answer: answer)
        }
    }

    /// Opens a file and reads its size, on the task that answers rather than the event loop:
    /// opening a local file is one short system call, cheaper than a hop to a thread pool and back.
    private static func open(_ path: String) throws -> OpenedFile {
        let handle = try NIOFileHandle(_deprecatedPath: path)
        do {
            let size = try handle.withUnsafeFileDescriptor { descriptor in
                var status = stat()
                guard fstat(descriptor, &status) == 0 else { throw IOError(errnoCode: errno, reason: "fstat") }
                return Int64(status.st_size)
            }
            return OpenedFile(handle: handle, size: size)
        } catch {
            try? handle.close()
            throw error
        }
    }

    /// Answers on the event loop; returns the body still to pass on from an origin, if any.
    private func finish(_ prepared: Prepared, range: String?, head: HTTPRequestHead, context: ChannelHandlerContext) -> BodyRelay? {
        guard context.channel.isActive else {
            // The player left while the file was looked up.
            try? prepared.file?.handle.close()
            return nil
        }
        switch prepared.answer {
        case .refused(let status, let reason):
            sendText(HTTPResponseStatus(statusCode: status), reason, head: head, context: context)
            return nil
        case .text(let text, let contentType):
            sendText(.ok, text, contentType: contentType, head: head, context: context)
            return nil
        case .bytes(let bytes, let contentType):
            send(.ok, ByteBuffer(bytes: bytes), contentType: contentType, head: head, context: context)
            return nil
        case .origin(_, let contentType):
            switch prepared.origin {
            case .text(let status, let reason, let extra):
                sendText(status, reason, extra: extra, head: head, context: context)
                return nil
            case .relay(let status, var headers, let body, let skip, let length):
                headers.add(name: "Content-Type", value: contentType)
                headers.add(name: "Accept-Ranges", value: "bytes")
                headers.add(name: "Cache-Control", value: "no-store")
                // A body of unknown length reaches an HTTP/1.0 player framed by the connection's end.
                var head = head
                if length == nil, head.version == .http1_0 { head.headers.replaceOrAdd(name: "connection", value: "close") }
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: withConnection(headers, head)))),
                              promise: nil)
                guard head.method == .GET, let body, length != 0 else {
                    end(head, context: context) {}
                    return nil
                }
                context.flush()
                return BodyRelay(channel: context.channel, body: body, skip: skip, length: length, keepAlive: head.isKeepAlive)
            case nil:
                sendText(.notFound, "Not found.", head: head, context: context)
                return nil
            }
        case .file(_, let contentType):
            guard let file = prepared.file else {
                sendText(.notFound, "Not found.", head: head, context: context)
                return nil
            }
            let handle = file.handle, size = file.size
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: contentType)
            headers.add(name: "Accept-Ranges", value: "bytes")
            headers.add(name: "Cache-Control", value: "no-store")
            let part: Range<Int64>
            let status: HTTPResponseStatus
            switch ByteRangeRequest(header: range, size: size) {
            case .whole:
                part = 0..<size
                status = .ok
            case .part(let bytes):
                part = bytes
                status = .partialContent
                headers.add(name: "Content-Range", value: "bytes \(bytes.lowerBound)-\(bytes.upperBound - 1)/\(size)")
            case .unsatisfiable:
                try? handle.close()
                var extra = HTTPHeaders()
                extra.add(name: "Content-Range", value: "bytes */\(size)")
                sendText(.rangeNotSatisfiable, "The range cannot be served: one range within the file's \(size) bytes.",
                         extra: extra, head: head, context: context)
                return nil
            }
            headers.add(name: "Content-Length", value: String(part.count))
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: withConnection(headers, head)))),
                          promise: nil)
            if head.method == .GET, !part.isEmpty {
                let region = FileRegion(fileHandle: handle, readerIndex: Int(part.lowerBound), endIndex: Int(part.upperBound))
                context.write(wrapOutboundOut(.body(.fileRegion(region))), promise: nil)
            }
            end(head, context: context) { try? handle.close() }
            return nil
        }
    }

    /// A short text answer, or a playlist not written to disk yet (`contentType`).
    private func sendText(
        _ status: HTTPResponseStatus, _ text: String, contentType: String? = nil, extra: HTTPHeaders = HTTPHeaders(), head: HTTPRequestHead,
        context: ChannelHandlerContext, closing: Bool = false
    ) {
        send(
            status, ByteBuffer(string: contentType == nil ? text + "\n" : text), contentType: contentType, extra: extra, head: head,
            context: context, closing: closing)
    }

    /// A whole body: a playlist or a key made for this answer (`Cache-Control: no-store`), or a
    /// reason in plain text (`contentType` nil).
    private func send(
        _ status: HTTPResponseStatus, _ body: ByteBuffer, contentType: String? = nil, extra: HTTPHeaders = HTTPHeaders(),
        head: HTTPRequestHead, context: ChannelHandlerContext, closing: Bool = false
    ) {
        var headers = extra
        headers.add(name: "Content-Type", value: contentType ?? "text/plain; charset=utf-8")
        if contentType != nil { headers.add(name: "Cache-Control", value: "no-store") }
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        var head = head
        if closing { head.headers.replaceOrAdd(name: "connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: withConnection(headers, head)))),
                      promise: nil)
        if head.method != .HEAD { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        end(head, context: context) {}
    }

    private func withConnection(_ headers: HTTPHeaders, _ head: HTTPRequestHead) -> HTTPHeaders {
        var headers = headers
        // A web view's player loads its page from the app's origin, not this one: it may read
        // what a URL carrying the run's token names (the token, not the origin, is the secret).
        headers.add(name: "Access-Control-Allow-Origin", value: "*")
        headers.add(name: "Access-Control-Expose-Headers", value: "Content-Range, Content-Length, Accept-Ranges")
        if !head.isKeepAlive { headers.add(name: "Connection", value: "close") }
        return headers
    }

    /// Ends the answer; closes the connection after it when the player asked to.
    private func end(_ head: HTTPRequestHead, context: ChannelHandlerContext, then cleanUp: @escaping @Sendable () -> Void) {
        let keepAlive = head.isKeepAlive
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            cleanUp()
            if !keepAlive { channel.close(promise: nil) }
        }
    }
}
