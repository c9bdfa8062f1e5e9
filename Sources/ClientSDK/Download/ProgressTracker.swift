import Foundation
import Synchronization

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

    /// Whether nothing of the file is on the device: no whole file, no partial bytes.
    func isEmpty(_ index: Int) -> Bool {
        state.withLock { $0.bytes[index] == 0 && $0.totals[index] == nil }
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
