import Foundation

/// Adjacent byte ranges of one remote file asked for in one request, as Media3's segment
/// downloader merges them: byte-range HLS and DASH `SegmentBase` or `mediaRange` segments are
/// parts of one file, and on a far link each request costs a round trip. Each part still
/// becomes a local file of its own (`FileFetcher.fetchRun`).
///
/// Only parts with nothing on disk join a run: a part left partial by a stopped download
/// resumes on its own, as any file does. A run is one request in flight for the engine's
/// concurrency; what a broken run did not bring is fetched part by part under the rule of threes.
enum RangeRuns {
    /// The most bytes one request asks for: large enough to spare many round trips, small
    /// enough that a broken run costs little and a title still spreads over many requests.
    static let maxBytes: Int64 = 4 << 20
    /// The most parts in one run.
    static let maxParts = 64

    /// `files` (in plan order) as the units the engine fetches: each a single file, or a run of
    /// two or more adjacent parts of one file. `isNew(index)`: nothing of the file is on disk.
    static func units(of files: [DownloadFile], isNew: (Int) -> Bool) -> [[Int]] {
        var units: [[Int]] = []
        var bytes: Int64 = 0
        for index in files.indices {
            if let last = units.last?.last, units[units.count - 1].count < maxParts, joins(files[index], after: files[last]),
                isNew(index), isNew(last), bytes + Int64(files[index].byteRange?.length ?? 0) <= maxBytes
            {
                units[units.count - 1].append(index)
                bytes += Int64(files[index].byteRange?.length ?? 0)
            } else {
                units.append([index])
                bytes = Int64(files[index].byteRange?.length ?? 0)
            }
        }
        return units
    }

    /// Whether `file` continues `previous` in one request: the same file, its range starting
    /// where the other's ends, both media held to the same rules and to no size rule (init
    /// sections and keys are fetched alone, held to their bounds).
    private static func joins(_ file: DownloadFile, after previous: DownloadFile) -> Bool {
        guard let range = file.byteRange, let before = previous.byteRange, file.url == previous.url, file.isMedia, previous.isMedia,
            !file.isAncillary, file.sizeRule == nil, previous.sizeRule == nil, range.length > 0, before.length > 0
        else { return false }
        let (end, overflow) = before.offset.addingReportingOverflow(before.length)
        return !overflow && range.offset == end
    }
}
