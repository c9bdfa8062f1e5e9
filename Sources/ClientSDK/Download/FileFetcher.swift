import AsyncHTTPClient
import Foundation
import Synchronization
import NIOCore
import NIOHTTP1
import NIOPosix

/// Fetches one remote file of a download (a flat file, an HLS segment, init section or key) to a
/// local path: into `<path>.partial` first, renamed once complete, so a file at its final path is
/// whole and is never fetched again. With `flushes` that holds across a power loss too: the file
/// is flushed to disk before its rename; without (the engine's default), only across an app kill:
/// a system crash can leave the renamed file short, which the engine looks for at its next start
/// (`SystemRestart.swift`). A partial file left by an interrupted fetch (or a
/// killed app) is resumed with a `Range` request guarded by `If-Range`
/// with the validator (`ETag`, else `Last-Modified`) its first answer carried; an origin that
/// ignores the range or whose file changed answers in full, and the fetch starts over cleanly.
struct FileFetcher: Sendable {
    /// One file to fetch.
    struct Request: Sendable {
        var url: URL
        /// Only these bytes of the remote file (an HLS `EXT-X-BYTERANGE`).
        var byteRange: ByteRange?
        /// `Content-Type`s accepted (without parameters, lowercase); nil accepts any.
        var allowedMIMETypes: Set<String>?
        /// The size the file's format fixes or bounds (a key, an init section); nil: none.
        var sizeRule: FileSizeRule? = nil
        /// CMCD to send with it, and how (nil: none).
        var cmcd: (data: CMCDRequestData, transmission: CMCDOptions.Transmission)? = nil

        /// The HTTP request for it, its CMCD in the query or the headers; the caller adds the range.
        var outgoing: HTTPClientRequest {
            let asked = cmcd.map { $0.transmission == .query ? $0.data.adding(to: url) : url } ?? url
            var outgoing = HTTPClientRequest(url: asked.absoluteString)
            if let cmcd, cmcd.transmission == .headers {
                for header in cmcd.data.headers { outgoing.headers.add(name: header.name, value: header.value) }
            }
            return outgoing
        }
    }

    /// What a partial file's first answer said, kept beside it for resuming.
    struct PartialInfo: Codable {
        var validator: String?
        /// The whole remote file's length, when the origin said it.
        var totalLength: Int64?
    }

    let client: HTTPClient
    /// Whether a complete file is flushed to disk before its rename (`DownloadOptions.flushesFiles`).
    var flushes = true
    /// The slowest an answer's body may arrive (`DownloadOptions.minimumTransferRate`).
    var minimumRate = TransferRate.default
    /// The app's cap on download bandwidth, shared by every fetch (nil: none).
    var bandwidth: BandwidthLimit?
    /// Which origins answer over HTTP/2, as every fetch through this fetcher (and its copies) finds.
    var origins = OriginProtocols()
    /// Files expected to be at least this large (or of unknown size) have their resume
    /// information written before their first byte, so that even a killed app resumes them.
    static let resumeInfoUpFrontBytes: Int64 = 4 << 20
    /// A smaller file's resume information is written once this much of it is on disk: an app
    /// killed over and over in a download of segments then loses at most this much of each
    /// segment in flight, for one small write per segment of this size or more.
    static let resumeInfoMidwayBytes: Int64 = 256 << 10
    /// How long an answer's head may take, connecting included. The body is held to
    /// `minimumRate`, and the client's read timeout ends a silence.
    static let headTimeout = TimeAmount.seconds(60)

    /// The origin's answer to `outgoing` (a request for `url`), its head within `headTimeout`
    /// (the body may take as long as it takes); which protocol it came over is noted.
    func answer(to outgoing: HTTPClientRequest, for url: URL) async throws(DownloadFailure) -> HTTPClientResponse {
        let response: HTTPClientResponse
        do {
            response = try await client.execute(outgoing, timeout: Self.headTimeout)
        } catch {
            throw DownloadFailure(.network, "Could not fetch \(url.absoluteString): \(NetworkErrorText.clause(error)).")
        }
        origins.answered(url, multiplexed: response.version.major >= 2)
        return response
    }

    /// An answer's `Content-Type` without parameters, lowercase ("" when it has none).
    static func mediaType(_ headers: HTTPHeaders) -> String {
        headers.first(name: "content-type")?.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
    }

    /// How far one file is.
    struct Progress: Sendable, Equatable {
        /// Bytes of the file on the device, partial file included.
        var bytes: Int64
        /// The file's size, once the answer says it.
        var total: Int64?
    }

    /// Fetches `request` to `destination` unless a complete file is there; `progress` hears when
    /// the answer arrives and after every write. Each write is first taken from `budget`: when
    /// the budget cannot cover it (or the whole file, if its size is known) the fetch stops
    /// with `.noSpace`, keeping what it wrote for later. Returns the file's size.
    @discardableResult
    func fetch(
        _ request: Request, to destination: URL, budget: StorageBudget? = nil, progress: @Sendable (Progress) -> Void = { _ in }
    ) async throws(DownloadFailure) -> Int64 {
        let fetched = try await fetchUnflushed(request, to: destination, budget: budget, progress: progress)
        try await finish(fetched)
        return fetched.size
    }

    /// A file whose bytes are all written but may not be on disk yet: `finish(_:)` flushes it
    /// (with `flushes`) and gives it its final name. Until then it is a partial file: a later
    /// fetch finishes it without a request when its resume information is there (a large file's
    /// always is), else fetches it again.
    struct Fetched: Sendable {
        let size: Int64
        let partial: (handle: FileHandle, url: URL, info: URL?)?
        let destination: URL
        /// Bytes this fetch received (not those resumed from); 0 when nothing was asked.
        var received: Int64 = 0
        /// Whether the answer came over HTTP/2 (nil: nothing was asked).
        var multiplexed: Bool? = nil
    }

    /// `sealing`: what the file's bytes become before it takes its name (a key, sealed by
    /// `KeyVault`), so that they are never at rest in the clear under it.
    func finish(_ fetched: Fetched, sealing: (@Sendable (Data) throws -> Data)? = nil) async throws(DownloadFailure) {
        guard let partial = fetched.partial else { return }
        defer { try? partial.handle.close() }
        do {
            if let sealing {
                let sealed = try sealing(try Data(contentsOf: partial.url))
                try partial.handle.truncate(atOffset: 0)
                try partial.handle.write(contentsOf: sealed)
            }
            // Not cancelled with the task: a file whose bytes are all there is finished, and a
            // pause must not read as a storage failure.
            if flushes { try await LocalFiles.waitingForTheDisk { try LocalFiles.flush(partial.handle) } }
            try LocalFiles.rename(partial.url, to: fetched.destination)
        } catch {
            throw Self.storageFailure(error, fetched.destination)
        }
        if let info = partial.info { try? LocalFiles.removeIfPresent(info) }
    }

    /// `fetch` but for the flush and the rename, which are the caller's: it calls `finish(_:)`,
    /// and may fetch the next file while the disk catches up. `inNewDirectory`: the caller knows
    /// the file's directory did not exist when the download began, so that none of the file's
    /// names can be there (most files of a download starting) and none is looked for.
    func fetchUnflushed(
        _ request: Request, to destination: URL, budget: StorageBudget? = nil, inNewDirectory: Bool = false,
        progress: @Sendable (Progress) -> Void = { _ in }
    ) async throws(DownloadFailure) -> Fetched {
        if !inNewDirectory, let size = LocalFiles.size(of: destination) { return Fetched(size: size, partial: nil, destination: destination) }
        let partial = destination.appendingPathExtension("partial")
        let infoURL = destination.appendingPathExtension("partial-info")
        // Resume information is read only beside a partial file with bytes (most files have
        // neither); without one it is stale, and goes before new information could pair with it.
        var have = inNewDirectory ? 0 : LocalFiles.size(of: partial) ?? 0
        let infoData = have > 0 ? try? Data(contentsOf: infoURL) : nil
        var info = infoData.flatMap { try? JSONDecoder().decode(PartialInfo.self, from: $0) }
        if info == nil { have = 0 }
        if have > 0, let length = request.byteRange.map({ Int64($0.length) }) ?? info?.totalLength, have >= length {
            if have == length, request.sizeRule?.allows(have) ?? true {
                // Every byte is there (stopped between the last write and the rename): no request.
                do {
                    let handle = try FileHandle(forWritingTo: partial)
                    return Fetched(size: have, partial: (handle, partial, infoURL), destination: destination)
                } catch {
                    throw Self.storageFailure(error, destination)
                }
            }
            // Longer than the file, or not a size its format allows: not something to resume. Start over.
            have = 0
            info = nil
        }

        var outgoing = request.outgoing
        let wanted = Self.range(for: request.byteRange, have: have)
        if let wanted { outgoing.headers.add(name: "Range", value: ContentRange.request(from: wanted.start, through: wanted.end)) }
        if have > 0, let validator = info?.validator { outgoing.headers.add(name: "If-Range", value: validator) }

        let response = try await answer(to: outgoing, for: request.url)
        let status = Int(response.status.code)
        guard status == 200 || status == 206 else {
            throw DownloadFailure(
                .http, status: status, retryAfter: FetchRetry.retryAfter(response.headers), "\(request.url.absoluteString) answered \(status).")
        }
        if let allowed = request.allowedMIMETypes {
            let type = Self.mediaType(response.headers)
            guard allowed.contains(type) else {
                throw DownloadFailure(.mimeType, status: status, "\(request.url.absoluteString) is \(type.isEmpty ? "untyped" : type), not one of \(allowed.sorted()).")
            }
        }

        // Where the answer's first byte falls in the remote file, and how many bytes to keep.
        var skip: Int64 = 0
        var expected: Int64?
        if status == 206 {
            // Exactly the range asked for: what the answer holds is then the bytes still missing.
            // An open-ended ask ends at the file's end, as this answer or the first one said it.
            // (The first answer's length is read back from disk: subtracted without trapping.)
            let contentRange = response.headers.first(name: "content-range").flatMap(ContentRange.init)
            let end = wanted?.end ?? (contentRange?.complete ?? info?.totalLength).map { $0.subtractingClamped(1) }
            guard let wanted, let contentRange, contentRange.first == wanted.start, end.map({ contentRange.last == $0 }) ?? true
            else {
                throw DownloadFailure(.protocolViolation, status: status, "\(request.url.absoluteString) answered a range that was not asked for.")
            }
            if let known = info?.totalLength, let total = contentRange.complete, known != total {
                throw DownloadFailure(.sizeChanged, status: status, "\(request.url.absoluteString) changed size from \(known) to \(total) bytes during the download.")
            }
            if info == nil { info = PartialInfo(validator: Self.validator(response.headers), totalLength: contentRange.complete) }
            expected = contentRange.length
        } else {
            // The whole file: the origin ignored the range or the file changed. Start over.
            have = 0
            let length = response.headers.first(name: "content-length").flatMap { Int64(httpDecimal: $0) }
            info = PartialInfo(validator: Self.validator(response.headers), totalLength: length)
            if let byteRange = request.byteRange {
                skip = Int64(byteRange.offset)
                expected = Int64(byteRange.length)
            } else {
                expected = length
            }
        }

        if let rule = request.sizeRule, let expected {
            // Declared against the format: refused before a byte is read.
            let declared = have.addingClamped(expected)
            guard rule.allows(declared) else {
                Self.discard(partial, infoURL)
                throw Self.breaks(rule, request, status: status, "declares \(declared) bytes")
            }
        }
        if let expected, let budget {
            // More than the storage rules could ever allow is the asset's error, not a reason to
            // hold the queue until there is room (there never will be).
            guard expected <= budget.ceiling else {
                throw DownloadFailure(.origin, status: status, "\(request.url.absoluteString) declares \(have.addingClamped(expected)) bytes, more than the storage rules could ever hold (\(budget.ceiling)).")
            }
            guard budget.canCover(expected) else { throw Self.noSpace(request, expected) }
        }
        // Below the ceiling (at most Int64.max) whatever the answer said; unchecked only without a budget.
        let total = expected.map { have.addingClamped($0) }
        progress(Progress(bytes: have, total: total))

        // What resuming needs is on disk before the first byte when the file is large; a small
        // file's once `resumeInfoMidwayBytes` of it are written, or if its fetch stops short, so
        // that a small segment costs no extra file (after a kill, a partial file without it
        // starts over).
        let resumeInfo = info
        var infoStored = have > 0
        let handle: FileHandle
        do {
            // A stale one would misdescribe the new partial file; and new information goes down
            // only once the old bytes are gone, or a kill in between would pair them. Looked for
            // first: an unlink takes the directory's lock, which the files fetched beside this
            // one need to be created and renamed, even when there is nothing to unlink.
            if !infoStored, !inNewDirectory, LocalFiles.size(of: infoURL) != nil { try LocalFiles.removeIfPresent(infoURL) }
            handle = try LocalFiles.openForWriting(partial, truncating: have == 0)
            try handle.seekToEnd()
            if !infoStored, expected.map({ $0 >= Self.resumeInfoUpFrontBytes }) ?? true {
                try JSONEncoder().encode(resumeInfo).write(to: infoURL)
                infoStored = true
            }
        } catch {
            throw Self.storageFailure(error, destination)
        }

        var written: Int64 = 0
        var finished = false
        // The answer broke the format's size: its bytes are no file's, not even to resume.
        var brokeRule = false
        var rate = minimumRate.watch()
        defer {
            if !finished { try? handle.close() }
            if brokeRule {
                Self.discard(partial, infoURL)
            } else if !infoStored, !finished, written > 0 {
                try? JSONEncoder().encode(resumeInfo).write(to: infoURL)
            }
        }
        do {
            for try await buffer in response.body {
                if let bandwidth {
                    // Time held back by the app's cap is not the origin's slowness.
                    rate.excuse(try await bandwidth.take(buffer.readableBytes))
                }
                // Counted as they arrive, skipped bytes too: a trickle of them is a trickle.
                if let slow = rate.add(buffer.readableBytes) {
                    throw DownloadFailure(.network, "\(request.url.absoluteString) sent \(slow.bytes) bytes in \(slow.seconds) s, slower than the \(minimumRate.bytesPerSecond) bytes/s a download needs; after \(have + written) bytes.")
                }
                var bytes = buffer
                if skip > 0 {
                    let dropped = min(Int64(bytes.readableBytes), skip)
                    bytes.moveReaderIndex(forwardBy: Int(dropped))
                    skip -= dropped
                }
                if let expected, written + Int64(bytes.readableBytes) > expected {
                    bytes = bytes.getSlice(at: bytes.readerIndex, length: Int(expected - written)) ?? ByteBuffer()
                }
                guard bytes.readableBytes > 0 else {
                    if let expected, written >= expected { break } else { continue }
                }
                // Reading stops one byte past what the format allows (the answer declared no
                // length, or more than it said): nothing past the rule is written.
                if let rule = request.sizeRule, have.addingClamped(written).addingClamped(Int64(bytes.readableBytes)) > rule.most {
                    brokeRule = true
                    throw Self.breaks(rule, request, status: status, "sent more than \(rule.most) bytes")
                }
                if let budget, !budget.take(Int64(bytes.readableBytes)) {
                    // An answer of no declared length that grows past what could ever fit.
                    if written.addingClamped(Int64(bytes.readableBytes)) > budget.ceiling {
                        throw DownloadFailure(.origin, status: status, "\(request.url.absoluteString) sent more than the storage rules could ever hold (\(budget.ceiling) bytes).")
                    }
                    throw Self.noSpace(request, Int64(bytes.readableBytes))
                }
                do {
                    try bytes.withUnsafeReadableBytes { try handle.write(contentsOf: $0) }
                } catch {
                    throw Self.storageFailure(error, destination)
                }
                written += Int64(bytes.readableBytes)
                if !infoStored, written >= Self.resumeInfoMidwayBytes {
                    // After the bytes it describes: a kill before it leaves a partial file
                    // without information, which starts over.
                    do {
                        try JSONEncoder().encode(resumeInfo).write(to: infoURL)
                    } catch {
                        throw Self.storageFailure(error, destination)
                    }
                    infoStored = true
                }
                progress(Progress(bytes: have + written, total: total))
            }
        } catch let failure as DownloadFailure {
            throw failure
        } catch {
            throw DownloadFailure(.network, "The download of \(request.url.absoluteString) broke off after \(have + written) bytes: \(NetworkErrorText.clause(error)).")
        }
        // A cancelled body sequence ends as if the answer were complete: with no length to
        // check against, the partial file would be taken for the whole one.
        if expected == nil, Task.isCancelled {
            throw DownloadFailure(.network, "The download of \(request.url.absoluteString) was cancelled after \(have + written) bytes.")
        }
        if let expected, written < expected {
            throw DownloadFailure(.network, "The download of \(request.url.absoluteString) ended after \(have + written) of \(total ?? expected) bytes.")
        }
        // A whole answer shorter than the format's size (a 15-byte key) is as wrong as a longer one.
        if let rule = request.sizeRule, !rule.allows(have + written) {
            brokeRule = true
            throw Self.breaks(rule, request, status: status, "sent \(have + written) bytes")
        }
        finished = true
        return Fetched(
            size: have + written, partial: (handle, partial, infoStored ? infoURL : nil), destination: destination, received: written,
            multiplexed: response.version.major >= 2)
    }

    /// The range to ask for: the rest of the sub-range, or of the file after what is held.
    private static func range(for byteRange: ByteRange?, have: Int64) -> (start: Int64, end: Int64?)? {
        if let byteRange {
            return (Int64(byteRange.offset) + have, Int64(byteRange.offset) + Int64(byteRange.length) - 1)
        }
        return have > 0 ? (have, nil) : nil
    }

    /// A strong `ETag`, else `Last-Modified`: what `If-Range` may carry (RFC 9110 §13.1.5).
    static func validator(_ headers: HTTPHeaders) -> String? {
        if let etag = headers.first(name: "etag"), !etag.hasPrefix("W/") { return etag }
        return headers.first(name: "last-modified")
    }

    /// An answer whose size breaks what the file's format fixes: the asset's failure, as any
    /// number from the origin that cannot be true.
    private static func breaks(_ rule: FileSizeRule, _ request: Request, status: Int, _ what: String) -> DownloadFailure {
        DownloadFailure(.origin, status: status, "\(request.url.absoluteString) \(what); the file must be \(rule.text).")
    }

    /// Removes a partial file and its resume information, if they are there.
    private static func discard(_ partial: URL, _ info: URL) {
        try? LocalFiles.removeIfPresent(partial)
        try? LocalFiles.removeIfPresent(info)
    }

    private static func noSpace(_ request: Request, _ bytes: Int64) -> DownloadFailure {
        DownloadFailure(.noSpace, "No room for \(bytes) more bytes of \(request.url.absoluteString) under the storage rules.")
    }

    static func storageFailure(_ error: any Error, _ destination: URL) -> DownloadFailure {
        DownloadFailure(.storage, "Could not write \(destination.lastPathComponent): \(error).")
    }
}
