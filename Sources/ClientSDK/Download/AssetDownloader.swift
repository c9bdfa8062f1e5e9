import AsyncHTTPClient
import Foundation
import Synchronization

/// Carries out an asset's plan (`DownloadPlan`, made by its format's `DownloadPlanner`): fetches its
/// files `parallelFiles` at a time, each file's fetch tried under `FetchRetry` (the rule of
/// threes' inner part: the engine counts the passes; a failure to flush or rename a fetched
/// file is a storage failure, not retried), then writes the files the plan writes itself. What
/// is complete on disk is never fetched again, and partial files with resume information (large
/// ones, and any whose fetch stopped short while the app ran) resume, so calling `download`
/// again after any failure, a cancellation or a kill of the app goes on where it stopped,
/// refetching at most the small files that were in flight at a kill.
struct AssetDownloader: Sendable {
    let fetcher: FileFetcher
    let parallelFiles: Int
    let planners: DownloadPlanners
    /// The app refreshes expired URLs (`DownloadOptions.urlRefresher`): a `401`, `403` or `410`
    /// ends the download at once, for a fresh URL, instead of being tried again as it is.
    var refreshesURLs = false
    /// Seals the key files the downloads keep; nil keeps them as they came (tests of the engine alone).
    var keyVault: KeyVault?
    /// How often a file is tried in a row, and the waits between.
    var retry: FetchRetry { planners.retry }

    /// How `file` of `request`'s asset is sealed before it takes its name: keys only.
    private func sealing(_ file: DownloadFile, of request: DownloadRequest) -> (@Sendable (Data) throws -> Data)? {
        guard let keyVault, AssetLayout.isKey(file.relativePath) else { return nil }
        let assetId = request.assetId, path = file.relativePath
        return { try keyVault.seal($0, assetId: assetId, path: path) }
    }

    /// Makes the asset's plan when it is queued (its format's `DownloadPlanner.prepare`), each
    /// manifest tried once: the app hears at once, and a passing failure leaves the asset
    /// queued for the engine, which fetches under the whole policy when the download starts.
    func prepare(_ request: DownloadRequest, in directory: URL, room: Int64, ceiling: Int64) async throws(DownloadFailure) -> DownloadPlan {
        try await planners.tryingOnce.planner(for: request.kind).prepare(request, in: directory, room: room, ceiling: ceiling)
    }

    /// Downloads every file of `plan` (`request`'s, made by the engine before the download
    /// starts) into `directory` and writes the files the plan writes; returns the asset's
    /// record (path relative to `contentRoot`).
    ///
    /// `beforeFile` runs before each try of a file with the asset's bytes on disk (the engine
    /// refreshes `budget` and checks the network there; it throws to stop). Throws a `DownloadFailure` (`.noSpace` when the budget
    /// ran out), or `CancellationError` when the task was cancelled.
    func download(
        _ request: DownloadRequest, plan: DownloadPlan, in directory: URL, relativeTo contentRoot: URL, budget: StorageBudget,
        beforeFile: @escaping @Sendable (_ assetBytes: Int64) throws -> Void, progress: @escaping @Sendable (AssetProgress) -> Void,
        ancillaryFailed: @escaping @Sendable (AncillaryFile, DownloadFailure) -> Void = { _, _ in }
    ) async throws -> LocalAsset {
        let files = plan.files
        let tracker = ProgressTracker(files: files, directory: directory, report: progress)
        // `parallelFiles` files are fetched at once; a fetched file is flushed to disk beside
        // them, so that the network does not wait for the disk (at most `parallelFiles` files
        // waiting for it, so that it does not fall behind without bound).
        enum Step: Sendable {
            case fetched(FileFetcher.Fetched, index: Int)
            case flushed
            /// An ancillary file that could not be fetched: reported, and the title goes on.
            case skipped
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
                        do {
                            return .fetched(try await fetch(files[index], index: index, request: request, directory: directory, budget: budget,
                                                            tracker: tracker, beforeFile: beforeFile), index: index)
                        } catch let failure as DownloadFailure where files[index].isAncillary && failure.kind != .noSpace {
                            skip(files[index], index: index, failure, request: request, directory: directory, tracker: tracker, report: ancillaryFailed)
                            return .skipped
                        }
                    }
                }
            }
            fill()
            do {
                while let step = try await group.next() {
                    switch step {
                    case .fetched(let file, let index):
                        fetching -= 1
                        flushing += 1
                        let sealing = sealing(files[index], of: request)
                        group.addTask {
                            try await fetcher.finish(file, sealing: sealing)
                            return .flushed
                        }
                    case .flushed:
                        flushing -= 1
                    case .skipped:
                        fetching -= 1
                    }
                    fill()
                }
            } catch {
                // One file failed or the download was stopped: the files already fetched are
                // finished all the same (a small one has no resume information, and would be
                // fetched again), then the first failure is the download's.
                group.cancelAll()
                while let result = await group.nextResult() {
                    if case .success(.fetched(let file, let index)) = result {
                        try? await fetcher.finish(file, sealing: sealing(files[index], of: request))
                    }
                }
                throw error
            }
        }
        try Task.checkCancellation()
        do {
            for file in plan.written {
                try Data(file.text.utf8).write(to: directory.appendingPathComponent(file.path, isDirectory: false), options: .atomic)
            }
        } catch {
            throw DownloadFailure(.storage, "Could not write the local playlists: \(error).")
        }
        if fetcher.flushes {
            try await flushNames(of: files, written: plan.written.map(\.path), request: request, in: directory)
        }
        // What is on disk: the files as fetched, the seals of the keys sealed in this run (a key
        // finished in an earlier one counted at its sealed size), the local playlists.
        var seals: Int64 = 0
        for (index, file) in files.enumerated() where keyVault != nil && AssetLayout.isKey(file.relativePath) {
            let onDisk = LocalFiles.size(of: directory.appendingPathComponent(file.relativePath, isDirectory: false)) ?? 0
            seals += max(0, onDisk - tracker.bytes(of: index))
        }
        let size = tracker.current.bytes + seals + Int64(plan.written.reduce(0) { $0 + $1.text.utf8.count })
        let relativeDirectory = directory.path.dropFirst(contentRoot.path.count).drop { $0 == "/" }
        return LocalAsset(assetId: request.assetId, relativePath: "\(relativeDirectory)/\(plan.mainPath)", size: size, addedAt: Date(), request: request)
    }

    /// Flushes the files the plan wrote (local playlists), then every directory of the asset once, up to the data
    /// directory (the first download creates `content/`): the files' names are entries of their
    /// directories, and a power loss must not leave a completed asset with files under their
    /// partial names. Each file's bytes were flushed before its rename; on Apple platforms only
    /// as far as an ordering barrier, and these full flushes take the drive's cache with them.
    private func flushNames(
        of files: [DownloadFile], written paths: [String], request: DownloadRequest, in directory: URL
    ) async throws(DownloadFailure) {
        let written = paths.map { directory.appendingPathComponent($0, isDirectory: false) }
        var directories = Set(files.map { directory.appendingPathComponent($0.relativePath, isDirectory: false).deletingLastPathComponent() })
        directories.remove(directory)
        do {
            try await LocalFiles.waitingForTheDisk { [directories] in
                for file in written { try LocalFiles.flush(path: file, fully: false) }
                for subdirectory in directories { try LocalFiles.flush(path: subdirectory, isDirectory: true, fully: false) }
                try LocalFiles.flushAssetDirectory(directory)
            }
        } catch {
            throw DownloadFailure(.storage, "Could not flush the asset's files to disk: \(error).")
        }
    }

    /// An ancillary file given up on: its partial bytes go (they are not the asset's), and the app hears why.
    private func skip(
        _ file: DownloadFile, index: Int, _ failure: DownloadFailure, request: DownloadRequest, directory: URL, tracker: ProgressTracker,
        report: @Sendable (AncillaryFile, DownloadFailure) -> Void
    ) {
        let destination = directory.appendingPathComponent(file.relativePath, isDirectory: false)
        try? LocalFiles.removeIfPresent(destination.appendingPathExtension("partial"))
        try? LocalFiles.removeIfPresent(destination.appendingPathExtension("partial-info"))
        tracker.update(index, FileFetcher.Progress(bytes: 0, total: 0))
        if let ancillary = request.ancillaries.first(where: { $0.relativePath == file.relativePath }) { report(ancillary, failure) }
    }

    /// One file, tried until all its bytes are written (not yet flushed), under `retry`: up to
    /// three times in a row without gaining a byte. Fatal failures and `.noSpace` end it at once,
    /// and an expired URL when the app refreshes URLs.
    private func fetch(
        _ file: DownloadFile, index: Int, request: DownloadRequest, directory: URL, budget: StorageBudget,
        tracker: ProgressTracker, beforeFile: @Sendable (Int64) throws -> Void
    ) async throws -> FileFetcher.Fetched {
        // Said to be a file: otherwise Foundation asks the file system whether it is a directory.
        let destination = directory.appendingPathComponent(file.relativePath, isDirectory: false)
        let fetchRequest = FileFetcher.Request(
            url: file.url, byteRange: file.byteRange, allowedMIMETypes: file.isMedia ? request.allowedMIMETypes : nil, sizeRule: file.sizeRule)
        // Only the first try: a failed one may leave a partial file.
        var inNewDirectory = tracker.inNewDirectory(index)
        return try await retry.run(progress: { tracker.bytes(of: index) }, stopsAt: { refreshesURLs && $0.isExpiredURL }) {
            try beforeFile(tracker.current.bytes)
            defer { inNewDirectory = false }
            let fetched = try await fetcher.fetchUnflushed(fetchRequest, to: destination, budget: budget, inNewDirectory: inNewDirectory) {
                tracker.update(index, $0)
            }
            tracker.update(index, FileFetcher.Progress(bytes: fetched.size, total: fetched.size))
            return fetched
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
