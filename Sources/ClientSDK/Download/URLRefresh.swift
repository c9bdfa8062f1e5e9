import Foundation

/// The app's source of fresh URLs for assets whose signed URLs expire (CDN tokens): when an
/// origin answers `401`, `403` or `410` during a download, the engine asks for the asset's URL
/// again before it counts the failure, and goes on with what is on disk.
public protocol URLRefresher: Sendable {
    /// A fresh URL for `asset` (its file, playlist or MPD), whose download was refused with
    /// `status`; nil when the app has none (the failure then counts as any other). Throwing
    /// counts the failure too.
    func refreshedURL(for asset: DownloadRequest, status: Int) async throws -> URL?
}

extension DownloadFailure {
    /// An answer that a signed URL's expiry gives: worth a fresh URL before it counts.
    var isExpiredURL: Bool {
        kind == .http && [401, 403, 410].contains(status ?? 0)
    }
}

extension DownloadPlan {
    /// Why `other` (the plan of a new URL) does not describe the same media as this plan, or nil
    /// when it does: the same files in the same order at the same local paths, with the same byte
    /// ranges and the same URL paths (hosts, ports, schemes and query strings may differ), so that
    /// what is on disk stays valid.
    func differenceInMedia(from other: DownloadPlan) -> String? {
        guard files.count == other.files.count else {
            return "the new manifest lists \(other.files.count) files where the one being downloaded lists \(files.count)"
        }
        for (old, new) in zip(files, other.files) {
            guard old.relativePath == new.relativePath, old.byteRange == new.byteRange else {
                return "the new manifest's file for \(old.relativePath) is \(new.relativePath) \(new.byteRange.map { "(\($0.httpRange))" } ?? "")"
            }
            guard old.url.path == new.url.path else {
                return "\(old.relativePath) moves from \(old.url.path.prefix(200)) to \(new.url.path.prefix(200)); only hosts and query strings may change"
            }
        }
        guard mainPath == other.mainPath else { return "the new manifest is of another kind" }
        return nil
    }
}

// `downloads.updateURL` and the refresh after an expired URL: the new URL's manifests are
// fetched and planned beside the asset, compared with the plan being downloaded, and swapped in
// only when they describe the same media.
extension DownloadRunner {
    /// Swaps the URL of a queued asset, keeping what is on disk; the download under way stops
    /// and goes on from the new URL. Throws `.invalidInput` for an asset not queued or a URL
    /// that is not http(s), `.download` when the new URL's media is not the same (the reason).
    func updateURL(assetId: String, url: URL) async throws {
        guard let queued = try database.queuedDownload(assetId: assetId) else {
            throw BackplaneClientError(kind: .invalidInput, message: "Asset \(assetId) is not in the download queue (a completed asset keeps its files).")
        }
        var request = queued.request
        request.url = url
        if let problem = request.problem { throw BackplaneClientError(kind: .invalidInput, message: problem) }
        guard state.beginURLChange(assetId) else {
            throw BackplaneClientError(kind: .invalidInput, message: "The URL of \(assetId) is being changed already.")
        }
        // Not started again until the swap is done, so that no download reads the manifests
        // while they are replaced.
        defer {
            state.endURLChange(assetId)
            signal.signal()
        }
        await cancelCurrent(ifAmong: [assetId])
        do {
            try await replaceURL(of: queued, with: request)
        } catch let failure as DownloadFailure {
            throw BackplaneClientError(kind: .download, message: "The URL of \(assetId) was not changed: \(failure)", underlying: failure)
        }
    }

    /// Asks the app's `URLRefresher` for a fresh URL after `failure`, and swaps it in; true when
    /// the download may go on at once without counting the failure. At most `maxRefreshes` in
    /// a row for one asset, so that a refresher whose URLs are refused too cannot loop.
    func refreshURL(of assetId: String, after failure: DownloadFailure) async -> Bool {
        guard failure.isExpiredURL, let refresher = options.urlRefresher, let queued = try? database.queuedDownload(assetId: assetId) else { return false }
        guard state.mayRefreshURL(assetId, bytes: queued.bytesDownloaded, atMost: Self.maxRefreshes) else { return false }
        guard let url = try? await refresher.refreshedURL(for: queued.request, status: failure.status ?? 0) else { return false }
        var request = queued.request
        request.url = url
        guard request.problem == nil, let current = try? database.queuedDownload(assetId: assetId) else { return false }
        do {
            try await replaceURL(of: current, with: request)
        } catch {
            return false
        }
        events.log(.downloadWarning(assetId: assetId, code: "urlRefreshed", message: "The origin answered \(failure.status ?? 0); the download goes on from a fresh URL."))
        return true
    }

    /// Refreshes asked for in a row before the failure counts.
    static let maxRefreshes = 3

    /// The asset's URL becomes `request.url`: for HLS and DASH its manifests are fetched into a
    /// scratch directory and planned, the plan compared with the kept one, and the new manifests
    /// and plan moved into the asset's directory. Throws a `DownloadFailure` when the new URL
    /// cannot be planned or its media is not the same.
    private func replaceURL(of queued: QueuedDownload, with request: DownloadRequest) async throws {
        let directory = content.directory(for: queued.assetId)
        let format = downloader.planners.planner(for: request.kind)
        if request.kind != .file, let kept = format.preparedPlan(queued.request, in: directory) {
            let scratch = content.scratchDirectory()
            defer { try? FileManager.default.removeItem(at: scratch) }
            let plan = try await format.prepare(request, in: scratch, room: .max, ceiling: .max)
            if let difference = kept.differenceInMedia(from: plan) { throw DownloadFailure(.playlist, "\(difference).") }
            do {
                let original = directory.appendingPathComponent(AssetLayout.originalDirectory, isDirectory: true)
                if FileManager.default.fileExists(atPath: original.path) { try FileManager.default.removeItem(at: original) }
                try FileManager.default.moveItem(at: scratch.appendingPathComponent(AssetLayout.originalDirectory), to: original)
                try LocalFiles.flushAssetDirectory(directory)
            } catch {
                throw DownloadFailure(.storage, "Could not keep the new manifests: \(error).")
            }
        }
        // A plan not made yet is made from the new URL when the download starts.
        try database.access { try $0.replaceDownloadRequest(request) }
    }
}
