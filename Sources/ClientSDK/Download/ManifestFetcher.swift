import Foundation

/// Fetches what a downloader reads to make an asset's plan (HLS playlists, a DASH MPD and its
/// `sidx` boxes) into the asset's `original/` directory, each flushed whatever
/// `DownloadOptions.flushesFiles` says (they are fetched once, and the plan is made from them).
/// Together they are held to the asset's budget (`PlaylistLimits.bytes`) and to what the storage
/// rules leave, each to its format's own largest size. Each is tried under `FetchRetry`, as
/// every file of a download is.
struct ManifestFetcher {
    private let fetcher: FileFetcher
    private let retry: FetchRetry
    /// `PlaylistLimits.bytes`, for the message.
    private let limit: Int64
    /// Left of it.
    private var bytes: Int64
    /// Left of what the storage rules allow.
    private var room: Int64
    /// The most the storage rules could ever allow.
    private let ceiling: Int64

    init(fetcher: FileFetcher, limits: PlaylistLimits, room: Int64, ceiling: Int64, retry: FetchRetry) {
        var flushing = fetcher
        flushing.flushes = true
        self.fetcher = flushing
        self.retry = retry
        self.limit = limits.bytes
        self.bytes = limits.bytes
        self.room = room
        self.ceiling = ceiling
    }

    /// Fetches `url` (only `byteRange` of it, when given) to `file` and returns its bytes. Past the
    /// budget or `maxBytes` the asset fails as `.playlist` (`tooLarge` says why); past the
    /// storage rules' room it waits for room (`.noSpace`), as any file does.
    mutating func fetch(
        _ url: URL, byteRange: ByteRange? = nil, to file: URL, maxBytes: Int, tooLarge: String
    ) async throws(DownloadFailure) -> Data {
        let allowance = min(bytes, Int64(maxBytes))
        let size: Int64
        do {
            size = try await retry.run { () async throws(DownloadFailure) -> Int64 in
                // Each try fetches the whole manifest under the whole allowance: a partial one
                // left by the try before would be counted twice, and manifests are small.
                try? LocalFiles.removeIfPresent(file.appendingPathExtension("partial"))
                try? LocalFiles.removeIfPresent(file.appendingPathExtension("partial-info"))
                return try await fetcher.fetch(.init(url: url, byteRange: byteRange), to: file, budget: StorageBudget(min(allowance, room), ceiling: ceiling))
            }
        } catch let failure as DownloadFailure where failure.kind == .noSpace {
            guard allowance <= room else { throw DownloadFailure(.noSpace, failure.message) }
            let why = allowance < Int64(maxBytes) ? "the asset's manifests are larger than \(limit) bytes in all" : tooLarge
            throw DownloadFailure(.playlist, "\(url.absoluteString): \(why)")
        } catch let failure as DownloadFailure {
            throw failure
        } catch is CancellationError {
            throw DownloadFailure(.network, "The fetch of \(url.absoluteString) was cancelled.")
        } catch {
            throw DownloadFailure(.network, "Could not fetch \(url.absoluteString): \(NetworkErrorText.clause(error)).")
        }
        bytes -= size
        room -= size
        do {
            return try Data(contentsOf: file)
        } catch {
            throw DownloadFailure(.storage, "Could not read back \(file.lastPathComponent): \(error).")
        }
    }
}
