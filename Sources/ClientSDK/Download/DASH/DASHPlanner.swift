import Foundation

/// DASH VOD: when the asset is queued, fetches its MPD (kept under `original/`), parses it once,
/// chooses the Representations the request asks for, fetches the `sidx` of any single-file one
/// (`SegmentBase@indexRange`), and keeps the plan made from them (`DASHPlan`), so the download
/// never reads the manifest again. An HTML page, malformed XML, a live MPD, or manifests past
/// `limits`, fail here as `.playlist`.
struct DASHPlanner: ManifestPlanner {
    let fetcher: FileFetcher
    let limits: PlaylistLimits
    let retry: FetchRetry

    /// Largest `sidx` read: 1 MiB is some 87,000 segment references.
    static let maxIndexBytes = 1 << 20

    func prepare(_ request: DownloadRequest, in directory: URL, room: Int64, ceiling: Int64) async throws(DownloadFailure) -> DownloadPlan {
        let originals = directory.appendingPathComponent(AssetLayout.originalDirectory)
        var manifests = manifestFetcher(afresh: directory, room: room, ceiling: ceiling)
        let data = try await manifests.fetch(
            request.url, to: directory.appendingPathComponent(DASHPlan.originalManifest), maxBytes: MPDDocument.maxBytes,
            tooLarge: "the DASH manifest is larger than \(MPDDocument.maxBytes) bytes")
        let manifest: DASHManifest
        do {
            manifest = try DASHManifest(root: try MPDDocument.parse(data), url: request.url)
        } catch {
            throw Self.failure(request.url, error)
        }
        let choices = DASHPlan.choose(manifest, request: request)
        guard !choices.isEmpty else { throw DownloadFailure(.playlist, "\(request.url.absoluteString): the manifest offers nothing the request chooses.") }
        var segmentsLeft = limits.segments
        var chosen: [(choice: DASHPlan.Choice, track: DASHTrack)] = []
        for (number, choice) in choices.enumerated() {
            let period = manifest.periods[choice.period]
            var track: DASHTrack
            do {
                switch try DASHSegments.track(choice.representation, period: period, maxSegments: segmentsLeft) {
                case .track(let listed):
                    track = listed
                case .index(let index):
                    guard index.indexRange.length <= Self.maxIndexBytes else {
                        throw MPDError("the index range of Representation \(choice.representation.id.prefix(40)) is larger than \(Self.maxIndexBytes) bytes")
                    }
                    let sidx = try await manifests.fetch(
                        index.url, byteRange: index.indexRange, to: originals.appendingPathComponent("index-\(number).sidx"),
                        maxBytes: Self.maxIndexBytes, tooLarge: "the segment index is larger than \(Self.maxIndexBytes) bytes")
                    track = try DASHSegments.track(index, sidx: sidx, maxSegments: segmentsLeft)
                }
            } catch let error as MPDError {
                throw Self.failure(request.url, error)
            } catch let failure as DownloadFailure {
                throw failure
            } catch {
                throw DownloadFailure(.playlist, "\(request.url.absoluteString): \(error)")
            }
            guard track.segments.count <= segmentsLeft else {
                throw DownloadFailure(.playlist, "\(request.url.absoluteString): more than \(limits.segments) segments (the asset's budget).")
            }
            guard !track.segments.isEmpty else {
                throw DownloadFailure(.playlist, "\(request.url.absoluteString): Representation \(choice.representation.id.prefix(40)) has no segments.")
            }
            segmentsLeft -= track.segments.count
            chosen.append((choice, track))
        }
        var timing: DASHPlan.Timing?
        if let range = request.timeRange { (chosen, timing) = try DASHPlan.cut(manifest, chosen: chosen, to: range, url: request.url) }
        let plan = DASHPlan.make(manifest, chosen: chosen, timing: timing)
        try await plan.keep(in: directory, assetId: request.assetId)
        return plan
    }

    private static func failure(_ url: URL, _ error: MPDError) -> DownloadFailure {
        DownloadFailure(.playlist, "\(url.absoluteString): \(error)")
    }
}
