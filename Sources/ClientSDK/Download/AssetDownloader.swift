import AsyncHTTPClient
import Foundation
import Synchronization

/// Carries out an asset's plan (`DownloadPlan`, made by its format's `DownloadPlanner`): fetches its
/// files in order, as many at a time as the link rewards (`AdaptiveConcurrency`), each file's
/// fetch tried under `FetchRetry` (the rule of
/// threes' inner part: the engine counts the passes; a failure to flush or rename a fetched
/// file is a storage failure, not retried), then writes the files the plan writes itself. What
/// is complete on disk is never fetched again, and partial files with resume information (large
/// ones, and any whose fetch stopped short while the app ran) resume, so calling `download`
/// again after any failure, a cancellation or a kill of the app goes on where it stopped,
/// refetching at most the small files that were in flight at a kill.
struct AssetDownloader: Sendable {
    let fetcher: FileFetcher
    /// How many files at once: where it starts, the per-host caps, whether it adapts.
    let concurrency: AdaptiveConcurrency.Settings
    let planners: DownloadPlanners
    /// The app refreshes expired URLs (`DownloadOptions.urlRefresher`): a `401`, `403` or `410`
    /// ends the download at once, for a fresh URL, instead of being tried again as it is.
    var refreshesURLs = false
    /// Seals the key files the downloads keep; nil keeps them as they came (tests of the engine alone).
    var keyVault: KeyVault?
    /// Common Media Client Data on every file's requests (`DownloadOptions.cmcd`; nil: none).
    var cmcd: CMCDOptions?
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
        let hosts = files.map { OriginProtocols.origin(of: $0.url) }
        // Single files, and runs of adjacent byte ranges of one file asked for in one request.
        let units = RangeRuns.units(of: files) { tracker.isEmpty($0) }
        let pace = AdaptiveConcurrency(
            concurrency, bandwidth: fetcher.bandwidth, multiplexing: fetcher.origins.multiplexingOrigins,
            // The media's origin: an AES-128 key, which comes first, is often on a host of its own.
            firstOrigin: files.firstIndex { $0.isMedia }.map { hosts[$0] } ?? hosts.first)
        // CMCD's session: this run of the asset's download.
        let session = UUID().uuidString.lowercased()
        // Files start in order, as many at once as `pace` admits (per host and in all); a
        // fetched file is flushed to disk beside them, so that the network does not wait for the
        // disk (at most as many files waiting for it as may be in flight, so that it does not
        // fall behind without bound).
        enum Step: Sendable {
            /// A unit's files, all their bytes written (a single file, or the parts of a run).
            case fetched([(file: FileFetcher.Fetched, index: Int)], unit: Int)
            case flushed
            /// An ancillary file that could not be fetched: reported, and the title goes on.
            case skipped(index: Int)
        }
        try await withThrowingTaskGroup(of: Step.self) { group in
            var next = units.startIndex
            var fetching = 0
            var fetchingFrom: [String: Int] = [:]
            var flushing = 0
            func fill() {
                while next < units.endIndex, flushing < pace.limit,
                    pace.admits(host: hosts[units[next][0]], toHost: fetchingFrom[hosts[units[next][0]], default: 0], total: fetching)
                {
                    let unit = next
                    let index = units[unit][0]
                    next += 1
                    fetching += 1
                    fetchingFrom[hosts[index], default: 0] += 1
                    group.addTask {
                        do {
                            if units[unit].count > 1 {
                                return .fetched(
                                    try await fetchRun(units[unit], of: files, host: hosts[index], request: request, directory: directory, budget: budget,
                                                       tracker: tracker, pace: pace, session: session, beforeFile: beforeFile), unit: unit)
                            }
                            let file = try await fetch(files[index], index: index, host: hosts[index], request: request, directory: directory,
                                                       budget: budget, tracker: tracker, pace: pace, session: session, beforeFile: beforeFile)
                            return .fetched([(file, index)], unit: unit)
                        } catch let failure as DownloadFailure where files[index].isAncillary && failure.kind != .noSpace {
                            skip(files[index], index: index, failure, request: request, directory: directory, tracker: tracker, report: ancillaryFailed)
                            return .skipped(index: index)
                        }
                    }
                }
            }
            fill()
            do {
                while let step = try await group.next() {
                    switch step {
                    case .fetched(let fetched, let unit):
                        fetching -= 1
                        fetchingFrom[hosts[units[unit][0]], default: 1] -= 1
                        for (file, index) in fetched {
                            flushing += 1
                            let sealing = sealing(files[index], of: request)
                            group.addTask {
                                try await fetcher.finish(file, sealing: sealing)
                                return .flushed
                            }
                        }
                    case .flushed:
                        flushing -= 1
                    case .skipped(let index):
                        fetching -= 1
                        fetchingFrom[hosts[index], default: 1] -= 1
                    }
                    fill()
                }
            } catch {
                // One file failed or the download was stopped: the files already fetched are
                // finished all the same (a small one has no resume information, and would be
                // fetched again), then the first failure is the download's.
                group.cancelAll()
                while let result = await group.nextResult() {
                    if case .success(.fetched(let fetched, _)) = result {
                        for (file, index) in fetched { try? await fetcher.finish(file, sealing: sealing(files[index], of: request)) }
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
        _ file: DownloadFile, index: Int, host: String, request: DownloadRequest, directory: URL, budget: StorageBudget,
        tracker: ProgressTracker, pace: AdaptiveConcurrency, session: String, afterRun: Bool = false,
        beforeFile: @Sendable (Int64) throws -> Void
    ) async throws -> FileFetcher.Fetched {
        // Said to be a file: otherwise Foundation asks the file system whether it is a directory.
        let destination = directory.appendingPathComponent(file.relativePath, isDirectory: false)
        let fetchRequest = fetchRequest(for: file, of: request, session: session)
        // Only the first try, and not after a run (`afterRun`), which may have left a partial
        // file to resume: a failed try may leave one.
        var inNewDirectory = !afterRun && tracker.inNewDirectory(index)
        return try await retry.run(progress: { tracker.bytes(of: index) }, stopsAt: { refreshesURLs && $0.isExpiredURL }) {
            try beforeFile(tracker.current.bytes)
            defer { inNewDirectory = false }
            let started = pace.clock
            let fetched: FileFetcher.Fetched
            do {
                fetched = try await fetcher.fetchUnflushed(fetchRequest, to: destination, budget: budget, inNewDirectory: inNewDirectory) {
                    tracker.update(index, $0)
                }
            } catch let failure as DownloadFailure {
                // What the link or the origin said of the load: the pace hears it at once, not after
                // three tries (a download stopped by the app says nothing of it).
                if !Task.isCancelled { pace.failed(failure, startedAt: started) }
                throw failure
            }
            pace.completed(bytes: fetched.received, startedAt: started, host: host, multiplexed: fetched.multiplexed)
            tracker.update(index, FileFetcher.Progress(bytes: fetched.size, total: fetched.size))
            return fetched
        }
    }

    /// What to ask for `file` of `request`'s asset in CMCD session `session`.
    private func fetchRequest(for file: DownloadFile, of request: DownloadRequest, session: String) -> FileFetcher.Request {
        FileFetcher.Request(
            url: file.url, byteRange: file.byteRange, allowedMIMETypes: file.isMedia ? request.allowedMIMETypes : nil, sizeRule: file.sizeRule,
            cmcd: cmcd.map { (CMCDRequestData(file: file, kind: request.kind, assetId: request.assetId, sessionId: session), $0.transmission) })
    }

    /// A run of adjacent byte ranges (`RangeRuns`) in one request, each part finished as it is
    /// whole; what it does not bring, each part alone under `retry`, as any file. Returns the
    /// parts fetched alone (the run's own are finished already).
    private func fetchRun(
        _ indices: [Int], of files: [DownloadFile], host: String, request: DownloadRequest, directory: URL, budget: StorageBudget,
        tracker: ProgressTracker, pace: AdaptiveConcurrency, session: String, beforeFile: @Sendable (Int64) throws -> Void
    ) async throws -> [(file: FileFetcher.Fetched, index: Int)] {
        try beforeFile(tracker.current.bytes)
        let started = pace.clock
        let parts = indices.map {
            FileFetcher.Part(
                request: fetchRequest(for: files[$0], of: request, session: session),
                destination: directory.appendingPathComponent(files[$0].relativePath, isDirectory: false))
        }
        let outcome = await fetcher.fetchRun(parts, budget: budget) { part, progress in tracker.update(indices[part], progress) }
        if let failure = outcome.failure {
            try Task.checkCancellation()
            pace.failed(failure, startedAt: started)
            // An origin that asked for a wait (Retry-After, or a 5xx or 429) gets it before the parts alone.
            let wait = retry.delay(after: failure, failures: 1)
            if wait > .zero { try await retry.sleep(wait) }
        } else {
            pace.completed(bytes: outcome.received, startedAt: started, host: host, multiplexed: outcome.multiplexed)
        }
        var alone: [(file: FileFetcher.Fetched, index: Int)] = []
        do {
            for index in indices.dropFirst(outcome.whole) {
                // A part the run cut short is on disk as far as its resume information goes, or
                // was removed (less than `runPartResumeInfoBytes` of it): the fetch goes on from there.
                let partial = directory.appendingPathComponent(files[index].relativePath, isDirectory: false).appendingPathExtension("partial")
                tracker.update(index, FileFetcher.Progress(bytes: LocalFiles.size(of: partial) ?? 0, total: nil))
                alone.append((try await fetch(
                    files[index], index: index, host: host, request: request, directory: directory, budget: budget, tracker: tracker,
                    pace: pace, session: session, afterRun: true, beforeFile: beforeFile), index))
            }
        } catch {
            // The parts already whole are finished all the same (they have no resume information).
            for (file, index) in alone { try? await fetcher.finish(file, sealing: sealing(files[index], of: request)) }
            throw error
        }
        return alone
    }
}
