import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// A file of the asset being downloaded that is not on disk yet, asked for by a player: fetched
/// from its origin and passed on as it arrives, not kept (the download fetches it in its turn;
/// two writers of one partial file would need a lock the download does not take).
///
/// The player's `Range` is honoured: against the sub-range of a remote file (`EXT-X-BYTERANGE`),
/// whose size the plan knows, it is translated and answered as for a file on disk; for a whole
/// remote file it is passed on when it is one range, and the origin's `206` relayed once its
/// `Content-Range` reads right. What the origin says is untrusted: lengths are read strictly,
/// and no more bytes are passed than the answer declared.
struct OriginPassThrough: Sendable {
    let client: HTTPClient
    /// How long the origin's answer head may take, connecting included: a player waits that long.
    static let headTimeout = TimeAmount.seconds(20)

    /// What to answer the player.
    enum Outcome {
        /// Answer with `status` and `headers`; then, for a `GET`, the body's bytes after `skip`,
        /// at most `length` (all when nil).
        case relay(status: HTTPResponseStatus, headers: HTTPHeaders, body: HTTPClientResponse.Body?, skip: Int64, length: Int64?)
        /// Answer with a short text: the origin could not be reached (404, as a missing file
        /// offline), it answered what cannot be passed on (502), or the range cannot be met (416).
        case text(HTTPResponseStatus, String, HTTPHeaders)
    }

    func open(_ file: DownloadFile, range: String?, method: HTTPMethod) async -> Outcome {
        var request = HTTPClientRequest(url: file.url.absoluteString)
        request.method = method == .HEAD ? .HEAD : .GET
        // What the player gets, and how it lies in the origin's answer.
        var status = HTTPResponseStatus.ok
        var headers = HTTPHeaders()
        var wanted: (start: Int64, count: Int64)?
        /// The first byte of a range passed on as it came (nil: none, or the last N bytes).
        var forwardedStart: Int64?
        if let byteRange = file.byteRange {
            let size = Int64(byteRange.length)
            let part: Range<Int64>
            switch ByteRangeRequest(header: range, size: size) {
            case .whole:
                part = 0..<size
            case .part(let bytes):
                part = bytes
                status = .partialContent
                headers.add(name: "Content-Range", value: "bytes \(bytes.lowerBound)-\(bytes.upperBound - 1)/\(size)")
            case .unsatisfiable:
                var extra = HTTPHeaders()
                extra.add(name: "Content-Range", value: "bytes */\(size)")
                return .text(.rangeNotSatisfiable, "The range cannot be served: one range within the file's \(size) bytes.", extra)
            }
            let start = Int64(byteRange.offset).addingClamped(part.lowerBound)
            wanted = (start, Int64(part.count))
            if !part.isEmpty { request.headers.add(name: "Range", value: ContentRange.request(from: start, through: start.addingClamped(Int64(part.count) - 1))) }
        } else if let range, let single = ByteRangeRequest.forwardable(range) {
            request.headers.add(name: "Range", value: single)
            forwardedStart = single.dropFirst("bytes=".count).split(separator: "-").first.flatMap { Int64(httpDecimal: $0) }
        }

        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, timeout: Self.headTimeout)
        } catch {
            return .text(.notFound, "Not downloaded yet, and its origin cannot be reached.", HTTPHeaders())
        }
        let answered = Int(response.status.code)
        if let wanted {
            // A sub-range: exactly the bytes asked for (206), or the whole file to cut them from (200).
            switch answered {
            case 206:
                guard let got = response.headers.first(name: "content-range").flatMap(ContentRange.init),
                    got.first == wanted.start, got.length >= wanted.count
                else { return Self.badAnswer("a range that was not asked for") }
                headers.add(name: "Content-Length", value: String(wanted.count))
                return .relay(status: status, headers: headers, body: response.body, skip: 0, length: wanted.count)
            case 200:
                headers.add(name: "Content-Length", value: String(wanted.count))
                return .relay(status: status, headers: headers, body: response.body, skip: wanted.start, length: wanted.count)
            default:
                return Self.badAnswer("\(answered)")
            }
        }
        // A whole remote file: the origin's answer, read strictly, is the player's.
        let length = response.headers.first(name: "content-length").flatMap { Int64(httpDecimal: $0) }
        switch answered {
        case 200:
            if let length { headers.add(name: "Content-Length", value: String(length)) }
            return .relay(status: .ok, headers: headers, body: response.body, skip: 0, length: length)
        case 206 where request.headers.contains(name: "range"):
            guard let got = response.headers.first(name: "content-range").flatMap(ContentRange.init),
                forwardedStart.map({ got.first == $0 }) ?? true
            else { return Self.badAnswer("a 206 without the Content-Range asked for") }
            headers.add(name: "Content-Range", value: "bytes \(got.first)-\(got.last)/\(got.complete.map(String.init) ?? "*")")
            headers.add(name: "Content-Length", value: String(got.length))
            return .relay(status: .partialContent, headers: headers, body: response.body, skip: 0, length: got.length)
        case 416:
            var extra = HTTPHeaders()
            if let value = response.headers.first(name: "content-range"), value.hasPrefix("bytes */"),
                let size = Int64(httpDecimal: value.dropFirst("bytes */".count)) {
                extra.add(name: "Content-Range", value: "bytes */\(size)")
            }
            return .text(.rangeNotSatisfiable, "The range cannot be served.", extra)
        default:
            return Self.badAnswer("\(answered)")
        }
    }

    private static func badAnswer(_ what: String) -> Outcome {
        .text(.badGateway, "Not downloaded yet, and its origin answered \(what).", HTTPHeaders())
    }
}

/// The body of an origin's answer passed on to the player as it arrives, after the answer's
/// head went out: each part is written once the one before it reached the socket, so a player
/// that reads slowly slows the origin, and memory stays flat. An answer that ends short, or a
/// failure on either side, closes the player's connection: its length was promised.
struct BodyRelay: Sendable {
    let channel: any Channel
    let body: HTTPClientResponse.Body
    /// Bytes of the body before the player's.
    let skip: Int64
    /// The player's bytes; nil: to the end of the body.
    let length: Int64?
    let keepAlive: Bool

    func run() async {
        var skip = skip
        var left = length
        do {
            for try await part in body {
                var bytes = part
                if skip > 0 {
                    let dropped = min(Int64(bytes.readableBytes), skip)
                    bytes.moveReaderIndex(forwardBy: Int(dropped))
                    skip -= dropped
                }
                if let remaining = left, Int64(bytes.readableBytes) > remaining {
                    bytes = bytes.getSlice(at: bytes.readerIndex, length: Int(remaining)) ?? ByteBuffer()
                }
                if bytes.readableBytes > 0 {
                    left = left.map { $0 - Int64(bytes.readableBytes) }
                    try await channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(bytes)))
                }
                if left == 0 { break }
            }
        } catch {
            channel.close(promise: nil)
            return
        }
        guard left.map({ $0 == 0 }) ?? true else {
            channel.close(promise: nil)
            return
        }
        let ended = (try? await channel.writeAndFlush(HTTPServerResponsePart.end(nil))) != nil
        if !keepAlive || !ended { channel.close(promise: nil) }
    }
}
