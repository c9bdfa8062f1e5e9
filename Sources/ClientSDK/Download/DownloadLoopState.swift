import Foundation

/// What the download loop knows beyond the database, as one value: the database holds each
/// asset's lasting state (queued, paused, failed, its error count, its grant), this holds what
/// lasts one pass, one sync or one run of the engine. It changes only through the transitions
/// below, each named for what happened, so a reader sees every state an asset can be in on the
/// loop's side and what moves it on:
///
/// - **next in line**: queued and runnable, none of the below (`next(among:)` picks it);
/// - **preparing**: being checked for the queue (`beginPreparing` … `endPreparing`);
/// - **changing URL**: its URL being swapped (`beginURLChange` … `endURLChange`): not started;
/// - **errored this pass**: a try failed (`tryFailed`), or the backplane did not answer
///   (`permissionUnanswered`): skipped until the next pass (`passEnded`), its retries are cleared
///   (`retriesCleared`), or it completes or leaves the queue;
/// - **denied until a sync**: the backplane denied it by a rule that can change
///   (`deniedByRule`): skipped until a sync ends (`syncEnded`), or the pass ends.
///
/// Beside them, per asset: whether its size was asked of its origin without an answer
/// (`estimateUnanswered`), and the fresh URLs asked for it in a row (`urlRefreshed`). For the
/// queue: whether it waits for more room than it had when it ran out (`ranOutOfRoom`), and what
/// the engine is doing (`status`, `block`), which the app is told of when they change.
struct DownloadLoopState {
    private(set) var status = DownloadEngineStatus.stopped
    private(set) var block: DownloadBlock?
    /// Syncs ended so far: a denial asked for before one may be out of date.
    private(set) var syncsSeen = 0
    /// The room the storage rules left when a download ran out of it: the queue stays blocked
    /// until there is more (an asset deleted, space freed) or the queue changes.
    private(set) var roomWhenStorageRanOut: Int64?

    private var erroredThisPass: Set<String> = []
    /// Of those, the ones denied by a rule that can change: asked again after a sync.
    private var deniedThisPass: Set<String> = []
    private var preparing: Set<String> = []
    private var changingURL: Set<String> = []
    private var estimateTried: Set<String> = []
    /// Fresh URLs asked for each asset in a row, and its bytes at the last one.
    private var refreshesInARow: [String: (count: Int, bytes: Int64)] = [:]

    // MARK: choosing the next download

    /// The first of the runnable assets (in queue order) this pass may still try.
    func next(among runnable: [String]) -> String? {
        runnable.first { !erroredThisPass.contains($0) && !changingURL.contains($0) }
    }

    /// Whether the asset may start now on the loop's side (its URL is not being changed).
    func mayStart(_ assetId: String) -> Bool { !changingURL.contains(assetId) }

    /// Whether its size is worth asking its origin (not asked in this run without an answer).
    func shouldEstimate(_ assetId: String) -> Bool { !estimateTried.contains(assetId) }

    // MARK: passes and syncs

    /// Every runnable asset was tried, or the queue emptied: the next pass tries them all again.
    mutating func passEnded() {
        erroredThisPass = []
        deniedThisPass = []
    }

    /// A sync ended: the backplane has heard of what frees places, so the assets denied by a
    /// rule are tried again. True when some were.
    mutating func syncEnded() -> Bool {
        syncsSeen += 1
        guard !deniedThisPass.isEmpty else { return false }
        erroredThisPass.subtract(deniedThisPass)
        deniedThisPass = []
        return true
    }

    // MARK: what happened to one asset

    mutating func tryFailed(_ assetId: String) {
        erroredThisPass.insert(assetId)
        refreshesInARow[assetId] = nil
    }

    /// The backplane gave no answer for `assetId`: it and `withoutGrant` (who would ask the
    /// same backplane) wait for the next pass.
    mutating func permissionUnanswered(_ assetId: String, withoutGrant: [String]) {
        erroredThisPass.insert(assetId)
        erroredThisPass.formUnion(withoutGrant)
    }

    /// The backplane denied it by a rule that can change: it waits for a sync, or the next pass.
    mutating func deniedByRule(_ assetId: String) {
        erroredThisPass.insert(assetId)
        deniedThisPass.insert(assetId)
    }

    /// The backplane said not in this pass: it waits for the next.
    mutating func toldToWait(_ assetId: String) {
        erroredThisPass.insert(assetId)
    }

    mutating func completed(_ assetId: String) {
        erroredThisPass.remove(assetId)
        refreshesInARow[assetId] = nil
    }

    /// The app cleared their retries (all when nil): tried again in this pass.
    mutating func retriesCleared(_ assetIds: [String]?) {
        guard let assetIds else { return passEnded() }
        erroredThisPass.subtract(assetIds)
        deniedThisPass.subtract(assetIds)
    }

    /// They left the queue: what the loop held of them goes, and the queue is no longer the one
    /// that ran out of room.
    mutating func dequeued(_ assetIds: [String]) {
        guard !assetIds.isEmpty else { return }
        erroredThisPass.subtract(assetIds)
        deniedThisPass.subtract(assetIds)
        roomWhenStorageRanOut = nil
    }

    mutating func estimateUnanswered(_ assetId: String) {
        estimateTried.insert(assetId)
    }

    /// Whether another fresh URL may be asked for the asset, which has `bytes` now; counts it
    /// when so. Bytes gained since the last refresh start the count again: a long download
    /// outlives many tokens.
    mutating func mayRefreshURL(_ assetId: String, bytes: Int64, atMost limit: Int) -> Bool {
        var refreshes = refreshesInARow[assetId] ?? (0, bytes)
        if bytes > refreshes.bytes { refreshes = (0, bytes) }
        guard refreshes.count < limit else { return false }
        refreshesInARow[assetId] = (refreshes.count + 1, refreshes.bytes)
        return true
    }

    /// False when it is being prepared already.
    mutating func beginPreparing(_ assetId: String) -> Bool { preparing.insert(assetId).inserted }
    mutating func endPreparing(_ assetId: String) { preparing.remove(assetId) }

    /// False when its URL is being changed already.
    mutating func beginURLChange(_ assetId: String) -> Bool { changingURL.insert(assetId).inserted }
    mutating func endURLChange(_ assetId: String) { changingURL.remove(assetId) }

    // MARK: the queue as a whole

    /// The head of the queue ran out of room, which was `room`: the queue waits for more.
    mutating func ranOutOfRoom(_ room: Int64) {
        roomWhenStorageRanOut = room
    }

    /// The queue changed (reordered), or the rules no longer block it: the head is tried again
    /// whatever the room.
    mutating func queueChanged() {
        roomWhenStorageRanOut = nil
    }

    /// Records the status; the app is told of it unless it is no news (`tellsApp`).
    mutating func setStatus(_ next: DownloadEngineStatus) -> (changed: Bool, tellsApp: Bool) {
        guard next != status else { return (false, false) }
        defer { status = next }
        // Between `stopped` and `idle`: an engine with nothing to download starting or stopping.
        return (true, !(status.isQuiet && next.isQuiet))
    }

    /// Records what blocks the queue; true when it changed.
    mutating func setBlock(_ next: DownloadBlock?) -> Bool {
        guard next != block else { return false }
        block = next
        return true
    }
}
