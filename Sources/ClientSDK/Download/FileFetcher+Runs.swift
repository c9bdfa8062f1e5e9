import AsyncHTTPClient
import Foundation
import NIOCore

extension FileFetcher {
    /// How much of a run's part is written before its resume information is. Lower than a file
    /// fetched alone (`resumeInfoMidwayBytes`): the engine may have many runs in flight, each a
    /// long answer, and what a kill costs is this much for each of them, for one small write
    /// per part of this size or more.
    static let runPartResumeInfoBytes: Int64 = 64 << 10

    /// One part of a run (`RangeRuns`): its request (with its byte range) and its local file.
    struct Part: Sendable {
        var request: Request
        var destination: URL
    }

    /// What a run brought: how many parts (from the first) are whole and finished, the bytes
    /// received, whether the answer came over HTTP/2, and what stopped it short, if anything did.
    struct RunOutcome: Sendable {
        var whole = 0
        var received: Int64 = 0
        var multiplexed: Bool?
        var failure: DownloadFailure?
    }

    /// Fetches `parts`, adjacent byte ranges of one file with nothing on disk, in one request,
    /// writing each part to its own partial file as its bytes arrive. It never throws: what it
    /// could not bring is the caller's to fetch part by part, under the whole policy, which
    /// also says what a wrong answer means (so an origin that ignores ranges, answers another
    /// type or breaks off costs one request, never a failure the parts alone would not have).
    /// Each part is finished (`finish(_:)`: flushed with `flushes`, then renamed) as soon as
    /// it is whole, and the part being written has its resume information once
    /// `runPartResumeInfoBytes` of it are on disk: a kill of the app in the middle of a run
    /// loses at most that much of it. A part cut short before then is removed.
    func fetchRun(_ parts: [Part], budget: StorageBudget?, progress: @Sendable (_ part: Int, Progress) -> Void) async -> RunOutcome {
        var outcome = RunOutcome()
        guard let first = parts.first?.request, let firstRange = first.byteRange, let lastRange = parts.last?.request.byteRange else {
            return outcome
        }
        let start = Int64(firstRange.offset)
        let end = Int64(lastRange.offset) + Int64(lastRange.length) - 1
        var outgoing = first.outgoing
        outgoing.headers.add(name: "Range", value: ContentRange.request(from: start, through: end))
        let response: HTTPClientResponse
        do {
            response = try await answer(to: outgoing, for: first.url)
        } catch {
            outcome.failure = error
            return outcome
        }
        outcome.multiplexed = response.version.major >= 2
        let status = Int(response.status.code)
        let type = Self.mediaType(response.headers)
        let contentRange = response.headers.first(name: "content-range").flatMap(ContentRange.init)
        guard status == 206, contentRange?.first == start, contentRange?.last == end, first.allowedMIMETypes?.contains(type) ?? true else {
            // Not the bytes asked for as asked: each part alone will say what it means.
            outcome.failure = DownloadFailure(
                .http, status: status, retryAfter: FetchRetry.retryAfter(response.headers),
                "\(first.url.absoluteString) answered \(status) to the merged range \(start)-\(end).")
            return outcome
        }

        var part = 0
        var written: Int64 = 0
        var handle: FileHandle?
        var infoStored = false
        var rate = minimumRate.watch()
        let partial = { (index: Int) in parts[index].destination.appendingPathExtension("partial") }
        let info = { (index: Int) in parts[index].destination.appendingPathExtension("partial-info") }
        defer {
            // A part cut short without its resume information goes: it would start over anyway.
            if let handle {
                try? handle.close()
                if !infoStored { try? LocalFiles.removeIfPresent(partial(part)) }
            }
        }
        do {
            for try await buffer in response.body {
                if let bandwidth { rate.excuse(try await bandwidth.take(buffer.readableBytes)) }
                if let slow = rate.add(buffer.readableBytes) {
                    throw DownloadFailure(.network, "\(first.url.absoluteString) sent \(slow.bytes) bytes in \(slow.seconds) s, slower than the \(minimumRate.bytesPerSecond) bytes/s a download needs.")
                }
                var bytes = buffer
                while bytes.readableBytes > 0, part < parts.count {
                    let length = Int64(parts[part].request.byteRange?.length ?? 0)
                    let take = Int(min(Int64(bytes.readableBytes), length - written))
                    guard budget?.take(Int64(take)) ?? true else {
                        throw DownloadFailure(.noSpace, "No room for \(take) more bytes of \(first.url.absoluteString) under the storage rules.")
                    }
                    do {
                        if handle == nil { handle = try LocalFiles.openForWriting(partial(part), truncating: true) }
                        try bytes.readSlice(length: take)?.withUnsafeReadableBytes { try handle?.write(contentsOf: $0) }
                    } catch {
                        throw Self.storageFailure(error, parts[part].destination)
                    }
                    written += Int64(take)
                    if !infoStored, written >= Self.runPartResumeInfoBytes, written < length {
                        // After the bytes it describes, as for a file fetched alone.
                        let resume = PartialInfo(validator: Self.validator(response.headers), totalLength: contentRange?.complete)
                        do {
                            try JSONEncoder().encode(resume).write(to: info(part))
                        } catch {
                            throw Self.storageFailure(error, parts[part].destination)
                        }
                        infoStored = true
                    }
                    progress(part, Progress(bytes: written, total: length))
                    if written == length, let whole = handle {
                        handle = nil
                        try await finish(Fetched(
                            size: length, partial: (whole, partial(part), infoStored ? info(part) : nil), destination: parts[part].destination))
                        infoStored = false
                        outcome.whole += 1
                        outcome.received += length
                        part += 1
                        written = 0
                    }
                }
                if part == parts.count { break }
            }
            if part < parts.count {
                throw DownloadFailure(.network, "The merged range of \(first.url.absoluteString) ended after \(outcome.whole) of \(parts.count) parts.")
            }
        } catch let failure as DownloadFailure {
            outcome.failure = failure
        } catch {
            outcome.failure = DownloadFailure(.network, "The merged range of \(first.url.absoluteString) broke off: \(NetworkErrorText.clause(error)).")
        }
        return outcome
    }
}
