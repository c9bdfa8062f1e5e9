import Foundation

/// Smooth Streaming VOD: when the asset is queued, fetches its client manifest (kept under
/// `original/`), parses it once, chooses the streams the request asks for, and keeps the plan
/// made from them (`SmoothPlan`), so the download never reads the manifest again. An HTML page,
/// malformed XML, a live manifest, or one past `limits`, fail here as `.playlist`.
struct SmoothPlanner: ManifestPlanner {
    let fetcher: FileFetcher
    let limits: PlaylistLimits
    let retry: FetchRetry

    func prepare(_ request: DownloadRequest, in directory: URL, room: Int64, ceiling: Int64) async throws(DownloadFailure) -> DownloadPlan {
        var manifests = manifestFetcher(afresh: directory, room: room, ceiling: ceiling)
        let data = try await manifests.fetch(
            request.url, to: directory.appendingPathComponent(SmoothPlan.originalManifest), maxBytes: SmoothManifest.maxBytes,
            tooLarge: "the Smooth Streaming manifest is larger than \(SmoothManifest.maxBytes) bytes")
        let manifest: SmoothManifest
        do throws(SmoothManifestError) {
            let root: MPDElement
            do {
                root = try MPDDocument.parseXML(data)
            } catch {
                throw SmoothManifestError(error.message)
            }
            manifest = try SmoothManifest(root: root, maxFragments: limits.segments)
        } catch {
            throw DownloadFailure(.playlist, "\(request.url.absoluteString): \(error)")
        }
        let choices = SmoothPlan.choose(manifest, request: request)
        guard !choices.isEmpty else {
            throw DownloadFailure(.playlist, "\(request.url.absoluteString): the manifest offers nothing the request chooses.")
        }
        let plan = try SmoothPlan.make(manifest, chosen: choices, url: request.url, timeRange: request.timeRange)
        try await plan.keep(in: directory, assetId: request.assetId)
        return plan
    }
}
