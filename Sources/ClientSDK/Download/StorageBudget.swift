import Synchronization

/// Bytes downloads may still write under the storage rules (`maxStorage`, `headroom`), shared
/// by the files of an asset fetched at the same time. The engine sets it before each file from
/// what is on disk and the volume's free space; every write takes from it first.
final class StorageBudget: Sendable {
    private struct State {
        var remaining: Int64
        var ceiling: Int64
    }

    private let state: Mutex<State>

    init(_ bytes: Int64, ceiling: Int64 = .max) {
        state = Mutex(State(remaining: bytes, ceiling: ceiling))
    }

    var available: Int64 { state.withLock { $0.remaining } }

    /// The most the rules could ever leave the rest of this asset (`maxStorage`, the volume's
    /// size less `headroom`, less what the asset holds), however much is deleted: a file
    /// declared larger, or growing past it, cannot be downloaded.
    var ceiling: Int64 { state.withLock { $0.ceiling } }

    func reset(to bytes: Int64, ceiling: Int64? = nil) {
        state.withLock { state in
            state.remaining = bytes
            if let ceiling { state.ceiling = ceiling }
        }
    }

    func canCover(_ bytes: Int64) -> Bool {
        state.withLock { $0.remaining >= bytes }
    }

    /// Takes `bytes` if they are there.
    func take(_ bytes: Int64) -> Bool {
        state.withLock { state in
            guard state.remaining >= bytes else { return false }
            state.remaining -= bytes
            return true
        }
    }
}
