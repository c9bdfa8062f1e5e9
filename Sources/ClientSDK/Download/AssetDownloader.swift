import AsyncHTTPClient
import Foundation

/// Downloads one asset into its directory: a flat file, or an HLS asset's files `parallelFiles`
/// at a time, each file's fetch tried up to three times in a row (the rule of threes' inner
/// part: the engine counts the passes; a failure to flush or rename a fetched file is a storage
/// failure, not retried). What is complete on disk is never fetched again, and partial files
/// with resume information (large ones, and any whose fetch stopped short while the app ran)
/// resume, so calling `download` again after any failure, a cancellation or a kill of the app
/// goes on where it stopped, refetching at most the small files that were in flight at a kill.
struct AssetDownloader: Sendable {
    let fetcher: FileFetcher
    let parallelFiles: Int
    let playlistLimits: PlaylistLimits

    /// A file is tried this many times in a row before the asset's pass counts as failed;
    /// bytes gained by a try start the count again.
    static let triesPerFile = 3

    /// Where a flat file goes in its asset's directory: the URL's file name when it is a safe
    /// one, else `download`.
    static func flatFileName(_ url: URL) -> String {
        let name = url.lastPathComponent
        let safe = !name.isEmpty && name.count <= 120 && !name.hasPrefix(".")
            && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }
        return safe && name != HLSDownloadPlan.originalDirectory ? name : "download"
    }

    /// Fetches what must be known before an asset is downloaded: an HLS asset's playlists, which
    /// are kept under `original/` and checked (an HTML page, a malformed or a live playlist fails
    /// here, as does one past `limits`). The engine calls it when the asset is queued and, if
    /// that could not fetch them (offline, an origin's passing fault), when its download starts.
    /// `room`: what the storage rules leave now; the playlists are counted against it. `ceiling`:
    /// the most they could ever leave (a playlist declared larger fails as `.origin`).
    func prepare(
        _ request: DownloadRequest, in directory: URL, limits: PlaylistLimits, room: Int64, ceiling: Int64
    ) async throws(DownloadFailure) {
        guard request.kind == .hls else { return }
        let originals = directory.appendingPathComponent(HLSDownloadPlan.originalDirectory)
        try? FileManager.default.removeItem(at: originals)
        var left = PlaylistAllowance(limit: limits.bytes, bytes: limits.bytes, room: room, ceiling: ceiling)
        try await fetchPlaylist(request.url, to: directory.appendingPathComponent(HLSDownloadPlan.originalAsset), left: &left)
        let assetPlaylist: HLSPlaylist
        do {
            assetPlaylist = try HLSPlaylist.parse(
                Data(contentsOf: directory.appendingPathComponent(HLSDownloadPlan.originalAsset)), url: request.url,
                maxSegments: limits.segments)
        } catch {
            throw DownloadFailure(.playlist, "\(request.url.absoluteString): \(error)")
        }
        let (master, streams) = HLSDownloadPlan.streams(of: assetPlaylist, request: request)
        if master != nil {
            for stream in streams {
                try await fetchPlaylist(stream.url, to: directory.appendingPathComponent(stream.original), left: &left)
            }
        }
        // Reads back everything fetched: what cannot be planned now would fail later.
        guard try HLSDownloadPlan.make(request: request, directory: directory, maxSegments: limits.segments) != nil else {
            throw DownloadFailure(.storage, "The playlists just fetched for \(request.assetId) are missing on the device.")
        }
        // The download is planned from these whenever it runs, also after a system crash (each
        // file was flushed before its rename; here the names), up to the data directory.
        do {
            try await FileFetcher.waitingForTheDisk {
                try LocalFiles.flush(path: originals, isDirectory: true, fully: false)
                try LocalFiles.flushAssetDirectory(directory)
            }
        } catch {
            throw DownloadFailure(.storage, "Could not flush the asset's playlists to disk: \(error).")
        }
    }

    /// Playlists are flushed whatever `DownloadOptions.flushesFiles` says: they are fetched once,
    /// and the download is planned from them. Each is held to what the asset's playlist budget
    /// and the storage rules leave (`left`), and to `HLSPlaylist.maxBytes`.
    private func fetchPlaylist(_ url: URL, to file: URL, left: inout PlaylistAllowance) async throws(DownloadFailure) {
        var flushing = fetcher
        flushing.flushes = true
        let allowance = min(left.bytes, Int64(HLSPlaylist.maxBytes))
        let size: Int64
        do {
            size = try await flushing.fetch(.init(url: url), to: file, budget: StorageBudget(min(allowance, left.room), ceiling: left.ceiling))
        } catch where error.kind == .noSpace {
            // Past the playlists' own limit: the playlist is the problem, for good. Past the
            // storage rules' room: the queue waits for room, as for any file.
            guard allowance <= left.room else { throw DownloadFailure(.noSpace, error.message) }
            let limit = allowance < Int64(HLSPlaylist.maxBytes)
                ? "the asset's playlists are larger than \(left.limit) bytes in all" : "\(HLSPlaylistError.tooLarge(HLSPlaylist.maxBytes))"
            throw DownloadFailure(.playlist, "\(url.absoluteString): \(limit)")
        }
        left.bytes -= size
        left.room -= size
    }

    /// What an asset's playlists may still take while they are fetched.
    private struct PlaylistAllowance {
        /// `PlaylistLimits.bytes`, for the message.
        let limit: Int64
        /// Left of it.
        var bytes: Int64
        /// Left of what the storage rules allow.
        var room: Int64
        /// The most the storage rules could ever allow.
        let ceiling: Int64
    }

    /// Downloads every file of `request` into `directory` and, for HLS, writes the local
    /// playlists; returns the asset's record (path relative to `contentRoot`).
    ///
    /// `beforeFile` runs before each try of a file with the asset's bytes on disk (the engine
    /// refreshes `budget` and checks the network there; it throws to stop). Throws a `DownloadFailure` (`.noSpace` when the budget
    /// ran out), or `CancellationError` when the task was cancelled.
    func download(
        _ request: DownloadRequest, in directory: URL, relativeTo contentRoot: URL, budget: StorageBudget,
        beforeFile: @escaping @Sendable (_ assetBytes: Int64) throws -> Void, progress: @escaping @Sendable (AssetProgress) -> Void
    ) async throws -> LocalAsset {
        let files: [DownloadFile]
        var playlists: [(path: String, text: String)] = []
        let mainPath: String
        switch request.kind {
        case .file:
            mainPath = Self.flatFileName(request.url)
            files = [DownloadFile(url: request.url, byteRange: nil, relativePath: mainPath, isMedia: true)]
        case .hls:
            // Playlists not fetched yet (the asset was queued offline, or its origin failed
            // then): fetched now, under the same limits, and counted as this pass's try.
            var made = try HLSDownloadPlan.make(request: request, directory: directory, maxSegments: playlistLimits.segments)
            if made == nil {
                try await prepare(request, in: directory, limits: playlistLimits, room: budget.available, ceiling: budget.ceiling)
                made = try HLSDownloadPlan.make(request: request, directory: directory, maxSegments: playlistLimits.segments)
            }
            guard let plan = made else {
                throw DownloadFailure(.storage, "The playlists of \(request.assetId) are missing on the device.")
            }
            files = plan.files
            playlists = plan.playlists
            mainPath = HLSDownloadPlan.indexPlaylist
        }
        let tracker = ProgressTracker(files: files, directory: directory, report: progress)
        // `parallelFiles` files are fetched at once; a fetched file is flushed to disk beside
        // them, so that the network does not wait for the disk (at most `parallelFiles` files
        // waiting for it, so that it does not fall behind without bound).
        enum Step: Sendable {
            case fetched(FileFetcher.Fetched)
            case flushed
        }
        try await withThrowingTaskGroup(of: Step.self) { group in
            var next = files.startIndex
            var fetching = 0
            var flushing = 0
            func fill() {
                while next < files.endIndex, fetching < parallelFiles, flushing < parallelFiles {
                    let index = next
                    next += 1
                    fetching += 1
                    group.addTask {
                        .fetched(try await fetch(files[index], index: index, request: request, directory: directory, budget: budget,
                                                 tracker: tracker, beforeFile: beforeFile))
                    }
                }
            }
            fill()
            do {
                while let step = try await group.next() {
                    switch step {
                    case .fetched(let file):
                        fetching -= 1
                        flushing += 1
                        group.addTask {
                            try await fetcher.finish(file)
                            return .flushed
                        }
                    case .flushed:
                        flushing -= 1
                    }
                    fill()
                }
            } catch {
                // One file failed or the download was stopped: the files already fetched are
                // finished all the same (a small one has no resume information, and would be
                // fetched again), then the first failure is the download's.
                group.cancelAll()
                while let result = await group.nextResult() {
                    if case .success(.fetched(let file)) = result { try? await fetcher.finish(file) }
                }
                throw error
            }
        }
        try Task.checkCancellation()
        do {
            for playlist in playlists {
                try Data(playlist.text.utf8).write(to: directory.appendingPathComponent(playlist.path, isDirectory: false), options: .atomic)
            }
        } catch {
            throw DownloadFailure(.storage, "Could not write the local playlists: \(error).")
        }
        if fetcher.flushes {
            try await flushNames(of: files, playlists: playlists.map(\.path), request: request, in: directory)
        }
        let size = tracker.current.bytes + Int64(playlists.reduce(0) { $0 + $1.text.utf8.count })
        let relativeDirectory = directory.path.dropFirst(contentRoot.path.count).drop { $0 == "/" }
        return LocalAsset(assetId: request.assetId, relativePath: "\(relativeDirectory)/\(mainPath)", size: size, addedAt: Date(), request: request)
    }

    /// Flushes the local playlists, then every directory of the asset once, up to the data
    /// directory (the first download creates `content/`): the files' names are entries of their
    /// directories, and a power loss must not leave a completed asset with files under their
    /// partial names. Each file's bytes were flushed before its rename; on Apple platforms only
    /// as far as an ordering barrier, and these full flushes take the drive's cache with them.
    private func flushNames(
        of files: [DownloadFile], playlists: [String], request: DownloadRequest, in directory: URL
    ) async throws(DownloadFailure) {
        let written = playlists.map { directory.appendingPathComponent($0, isDirectory: false) }
        var directories = Set(files.map { directory.appendingPathComponent($0.relativePath, isDirectory: false).deletingLastPathComponent() })
        directories.remove(directory)
        do {
            try await FileFetcher.waitingForTheDisk { [directories] in
                for file in written { try LocalFiles.flush(path: file, fully: false) }
                for subdirectory in directories { try LocalFiles.flush(path: subdirectory, isDirectory: true, fully: false) }
                try LocalFiles.flushAssetDirectory(directory)
            }
        } catch {
            throw DownloadFailure(.storage, "Could not flush the asset's files to disk: \(error).")
        }
    }

    /// One file, tried until all its bytes are written (not yet flushed), up to `triesPerFile`
    /// times in a row without gaining a byte. Fatal failures and `.noSpace` end it at once.
    private func fetch(
        _ file: DownloadFile, index: Int, request: DownloadRequest, directory: URL, budget: StorageBudget,
        tracker: ProgressTracker, beforeFile: @Sendable (Int64) throws -> Void
    ) async throws -> FileFetcher.Fetched {
        // Said to be a file: otherwise Foundation asks the file system whether it is a directory.
        let destination = directory.appendingPathComponent(file.relativePath, isDirectory: false)
        let fetchRequest = FileFetcher.Request(
            url: file.url, byteRange: file.byteRange, allowedMIMETypes: file.isMedia ? request.allowedMIMETypes : nil)
        var failures = 0
        // Only the first try: a failed one may leave a partial file.
        var inNewDirectory = tracker.inNewDirectory(index)
        while true {
            try Task.checkCancellation()
            try beforeFile(tracker.current.bytes)
            let before = tracker.bytes(of: index)
            defer { inNewDirectory = false }
            do {
                let fetched = try await fetcher.fetchUnflushed(fetchRequest, to: destination, budget: budget, inNewDirectory: inNewDirectory) {
                    tracker.update(index, $0)
                }
                tracker.update(index, FileFetcher.Progress(bytes: fetched.size, total: fetched.size))
                return fetched
            } catch {
                try Task.checkCancellation()
                if error.isFatal || error.kind == .noSpace { throw error }
                failures = tracker.bytes(of: index) > before ? 1 : failures + 1
                if failures >= Self.triesPerFile { throw error }
            }
        }
    }
}

/// How far an asset is: bytes on the device and the size expected.
struct AssetProgress: Sendable, Equatable {
    var bytes: Int64
    var expected: Int64?
    /// Some file's size is still a guess.
    var isEstimate: Bool
}

/// Adds the files' progress up as it comes from several fetches at once. A file's size counts
/// once the answer says it; until then its bandwidth estimate does, or the average of the sizes
/// known, so HLS progress moves smoothly from a guess to the truth.
final class ProgressTracker: Sendable {
    private struct State {
        var bytes: [Int64]
        var totals: [Int64?]
        var estimates: [Int64?]
        var sumBytes: Int64 = 0
        var sumKnownTotals: Int64 = 0
        var knownCount = 0
        var sumEstimatesOfUnknown: Int64 = 0
        var unknownWithoutEstimate = 0
    }

    private let state: Mutex<State>
    private let report: @Sendable (AssetProgress) -> Void
    /// Files whose directory was not there when the download began.
    private let newDirectory: [Bool]

    /// Starts from what is already on disk: complete files and partial ones. A directory that is
    /// not there yet (a download starting) is looked for once, not once per file in it.
    init(files: [DownloadFile], directory: URL, report: @escaping @Sendable (AssetProgress) -> Void) {
        var state = State(bytes: [], totals: [], estimates: files.map(\.estimatedBytes))
        var directoryExists: [Substring: Bool] = [:]
        var newDirectory: [Bool] = []
        for file in files {
            let parent = file.relativePath.lastIndex(of: "/").map { file.relativePath[..<$0] } ?? ""
            let present = directoryExists[parent] ?? {
                let exists = LocalFiles.size(of: directory.appendingPathComponent(String(parent), isDirectory: true)) != nil
                directoryExists[parent] = exists
                return exists
            }()
            newDirectory.append(!present)
            let destination = present ? directory.appendingPathComponent(file.relativePath, isDirectory: false) : nil
            if let destination, let size = LocalFiles.size(of: destination) {
                state.bytes.append(size)
                state.totals.append(size)
                state.sumKnownTotals = state.sumKnownTotals.addingClamped(size)
                state.knownCount += 1
            } else {
                state.bytes.append(destination.flatMap { LocalFiles.size(of: $0.appendingPathExtension("partial")) } ?? 0)
                state.totals.append(nil)
                if let estimate = file.estimatedBytes {
                    state.sumEstimatesOfUnknown = state.sumEstimatesOfUnknown.addingClamped(estimate)
                } else {
                    state.unknownWithoutEstimate += 1
                }
            }
            state.sumBytes += state.bytes.last!
        }
        self.state = Mutex(state)
        self.newDirectory = newDirectory
        self.report = report
        report(current)
    }

    /// Whether the file's directory was not there when the download began: then nothing of it is.
    func inNewDirectory(_ index: Int) -> Bool { newDirectory[index] }

    var current: AssetProgress {
        state.withLock { state in
            let average = state.knownCount > 0 ? state.sumKnownTotals / Int64(state.knownCount) : nil
            // Sizes and estimates are the origin's and the playlist's: sums stop at Int64.max.
            let guessed = state.unknownWithoutEstimate == 0 ? 0 : average.map { $0.multipliedClamped(by: Int64(state.unknownWithoutEstimate)) }
            let expected = guessed.map { state.sumKnownTotals.addingClamped(state.sumEstimatesOfUnknown).addingClamped($0) }
            return AssetProgress(
                bytes: state.sumBytes, expected: expected,
                isEstimate: state.knownCount < state.totals.count)
        }
    }

    func bytes(of index: Int) -> Int64 {
        state.withLock { $0.bytes[index] }
    }

    func update(_ index: Int, _ progress: FileFetcher.Progress) {
        state.withLock { state in
            state.sumBytes += progress.bytes - state.bytes[index]
            state.bytes[index] = progress.bytes
            if state.totals[index] == nil, let total = progress.total {
                state.totals[index] = total
                state.sumKnownTotals = state.sumKnownTotals.addingClamped(total)
                state.knownCount += 1
                if let estimate = state.estimates[index] {
                    state.sumEstimatesOfUnknown = state.sumEstimatesOfUnknown.subtractingClamped(estimate)
                } else {
                    state.unknownWithoutEstimate -= 1
                }
            }
        }
        report(current)
    }
}
