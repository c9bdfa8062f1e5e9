import Foundation
import NIOHTTP1

/// The rule of threes' inner part, for every fetch a download makes: playlists, MPDs and their
/// `sidx` boxes (`ManifestFetcher`), keys, init sections, segments and flat files
/// (`AssetDownloader`). A fetch is tried up to `tries` times in a row before the asset's pass
/// counts an error (the engine counts the passes); a try that gained bytes starts the count
/// again. Failures that another try cannot change (`isFatal`), no room (`.noSpace`, which blocks
/// the queue instead) and what the caller stops at end the tries at once.
///
/// Between tries it waits what the origin's `Retry-After` asks, held to `maxRetryAfter` (a
/// longer ask is waited up to the bound, then the next try asks again); without one, an origin
/// that said it is overloaded or warming up (a 5xx, 408 or 429) is given `backoff`'s step for
/// the failures so far, and anything else (a dropped connection, a wrong range) is tried again
/// at once, resuming what it sent. The wait is `sleep`'s, which tests replace so that they never
/// wait on the wall clock (`DownloadOptions.waitBeforeRetry`).
struct FetchRetry: Sendable {
    /// Tries in a row before the pass counts an error.
    var tries: Int
    /// Waits `Duration`; throws when the task is cancelled (a pause, a removal).
    var sleep: @Sendable (Duration) async throws -> Void

    /// The rule of threes.
    static let triesPerFetch = 3
    /// Waits after the first, second, … failure in a row when the origin gives no `Retry-After`.
    static let backoff: [Duration] = [.milliseconds(500), .seconds(1)]
    /// The longest `Retry-After` waited: three tries then take at most a minute of waiting, and
    /// an origin that asks for longer hears from the pass after (`retryPassDelay`) anyway.
    static let maxRetryAfter = Duration.seconds(30)

    init(tries: Int = Self.triesPerFetch, sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }) {
        self.tries = max(tries, 1)
        self.sleep = sleep
    }

    /// One try only: queueing answers the app at once, and a passing failure queues the asset
    /// for the engine, which fetches again under the whole policy when the download starts.
    var once: FetchRetry { FetchRetry(tries: 1, sleep: sleep) }

    /// Runs `attempt` until it returns, or throws what it threw last once it has failed
    /// `tries` times in a row, or at once for a failure no try can change or that `stopsAt`
    /// says ends the tries. `progress` (bytes of the file on the device) is read around each
    /// try: a try that gained bytes counts as the first failure again. Errors other than
    /// `DownloadFailure` (a cancellation, a rule that stopped the download) are not retried.
    func run<T>(
        progress: () -> Int64 = { 0 }, stopsAt: (DownloadFailure) -> Bool = { _ in false }, _ attempt: () async throws -> T
    ) async throws -> T {
        var failures = 0
        while true {
            try Task.checkCancellation()
            let before = progress()
            do {
                return try await attempt()
            } catch let failure as DownloadFailure {
                try Task.checkCancellation()
                if failure.isFatal || failure.kind == .noSpace || stopsAt(failure) { throw failure }
                failures = progress() > before ? 1 : failures + 1
                if failures >= tries { throw failure }
                let wait = delay(after: failure, failures: failures)
                if wait > .zero { try await sleep(wait) }
            }
        }
    }

    /// The wait before the next try after `failures` failures in a row, the last one `failure`.
    func delay(after failure: DownloadFailure, failures: Int) -> Duration {
        if let asked = failure.retryAfter { return min(asked, Self.maxRetryAfter) }
        guard failure.kind == .http, failure.isPassing else { return .zero }
        return Self.backoff[min(max(failures - 1, 0), Self.backoff.count - 1)]
    }

    /// What an answer's `Retry-After` asks (RFC 9110 §10.2.3): seconds as digits only, or an
    /// HTTP date, measured from `now`; a date in the past is no wait. Anything else (a sign, a
    /// fraction, a date in another form) is nil: the header is the origin's, and a wrong one is
    /// ignored, never trusted. Values beyond `maxRetryAfter` are held to it by `delay`.
    static func retryAfter(_ headers: HTTPHeaders, now: Date = Date()) -> Duration? {
        guard let value = headers.first(name: "retry-after")?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Int64(httpDecimal: value) {
            // Past the bound it is the bound: no need to keep a number that large.
            return seconds >= Int64(maxRetryAfter.components.seconds) ? maxRetryAfter : .seconds(seconds)
        }
        guard let date = httpDate(value) else { return nil }
        let seconds = date.timeIntervalSince(now)
        guard seconds.isFinite else { return nil }
        return seconds <= 0 ? .zero : min(.seconds(seconds), maxRetryAfter)
    }

    /// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form HTTP senders must use.
    private static func httpDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.date(from: text)
    }
}
