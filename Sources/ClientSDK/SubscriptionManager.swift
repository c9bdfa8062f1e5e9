import Foundation
import BackplaneWire

/// Subscriptions of this device: `engine.subscriptions`. Changes in subscribed feeds are read at
/// every sync of the engine (start, interval, `syncNow()`, wake-ups) and turned into queued
/// items under the feed's quota rules.
public struct SubscriptionManager: Sendable {
    let engine: BackplaneEngine

    /// Subscribes to a feed (or updates its rules); nil rules take the configuration's defaults.
    /// The feed's current episodes are queued at once, newest first, within `maxItems`.
    @discardableResult
    public func subscribe(feedId: String, maxItems: Int? = nil, autodeleteOldItems: Bool? = nil) async throws -> Subscription {
        try await engine.subscribe(feedId: feedId, request: SubscribeRequest(maxItems: maxItems, autodeleteOldItems: autodeleteOldItems))
    }

    /// Unsubscribes; items already queued or downloaded stay.
    public func unsubscribe(feedId: String) async throws {
        try await engine.unsubscribe(feedId: feedId)
    }

    public func list() async throws -> [Subscription] {
        try await engine.listSubscriptions()
    }

    /// Metadata of episodes updated since `date` (subscribed feeds only, or all), handed to the
    /// data source's `didReceive` and returned. Queues nothing: reading the subscribed feeds'
    /// changes into the queue is part of every `engine.sync()`.
    @discardableResult
    public func episodesUpdated(since date: Date, onlySubscribed: Bool = true) async throws -> [Episode] {
        try await engine.episodes(since: date, onlySubscribed: onlySubscribed)
    }

    /// The subscription items the SDK holds (one feed, or all), oldest first.
    public func items(feedId: String? = nil) async throws -> [SubscriptionItem] {
        try await engine.subscriptionItems(feedId: feedId)
    }
}

extension BackplaneEngine {
    var dataSource: any SubscriptionDataSource { configuration.subscriptions.dataSource ?? BackplaneMetadataDataSource() }

    func subscribe(feedId: String, request: SubscribeRequest) async throws -> Subscription {
        try requireRunning()
        do {
            let credentials = try await ensureRegistered()
            let response = try await withCredentialRecovery(credentials) { api, credentials in
                try await api.subscribe(feedId: feedId, request, as: credentials)
            }
            var summary = SubscriptionSyncSummary()
            // The server picked the newest within the quota; apply them oldest first, so the local
            // order (which autodelete goes by) follows publication.
            for episode in response.episodes.reversed() {
                let change = EpisodeChange(kind: .added, feedId: feedId, assetId: episode.episode.assetId, episode: episode)
                try await apply(change, rules: response.subscription, summary: &summary)
            }
            return response.subscription
        } catch let error as BackplaneClientError {
            report(error)
            throw error
        }
    }

    func unsubscribe(feedId: String) async throws {
        try requireRunning()
        do {
            let credentials = try await ensureRegistered()
            try await withCredentialRecovery(credentials) { api, credentials in try await api.unsubscribe(feedId: feedId, as: credentials) }
        } catch let error as BackplaneClientError {
            report(error)
            throw error
        }
    }

    func listSubscriptions() async throws -> [Subscription] {
        try requireRunning()
        let credentials = try await ensureRegistered()
        return try await withCredentialRecovery(credentials) { api, credentials in try await api.subscriptions(as: credentials) }.subscriptions
    }

    func subscriptionItems(feedId: String?) throws -> [SubscriptionItem] {
        try loadLocalState()
        return try storage { try $0.items(feedId: feedId) }
    }

    func episodes(since date: Date, onlySubscribed: Bool) async throws -> [Episode] {
        try requireRunning()
        let credentials = try await ensureRegistered()
        var all: [Episode] = []
        var cursor: String?
        var trail = CursorTrail(route: "episodes")
        repeat {
            let page = try await withCredentialRecovery(credentials) { api, credentials in
                try await api.episodes(since: date, onlySubscribed: onlySubscribed, cursor: cursor, as: credentials)
            }
            all += page.episodes
            cursor = page.nextCursor
            if let cursor { try trail.follow(cursor) }
        } while cursor != nil
        await dataSource.didReceive(all)
        return all
    }

    /// The subscription part of a sync: every page of changes after the stored cursor. The cursor
    /// is stored after each page, and applying a change twice is harmless, so a crash loses nothing.
    func syncSubscriptionChanges() async throws {
        let credentials = try await ensureRegistered()
        var cursor: String? = try storage { try $0.load(String.self, .feedCursor) }
        var summary = SubscriptionSyncSummary()
        var rules: [String: Subscription]?
        var trail = CursorTrail(route: "subscription changes", startingAt: cursor)
        // Status events only when something arrives (or fails): a quiet sync stays quiet.
        do {
            while state == .running {
                let page = try await withCredentialRecovery(credentials) { api, credentials in
                    try await api.changes(cursor: cursor, as: credentials)
                }
                if !page.changes.isEmpty, rules == nil {
                    broadcaster.emit(.subscriptionStatusChanged(.receiving))
                    rules = Dictionary(try await listSubscriptions().map { ($0.feedId, $0) }, uniquingKeysWith: { first, _ in first })
                }
                for change in page.changes {
                    summary.changes += 1
                    try await apply(change, rules: rules?[change.feedId], summary: &summary)
                }
                cursor = page.cursor
                try storage { try $0.save(page.cursor, .feedCursor) }
                if !page.hasMore { break }
                try trail.follow(page.cursor)
            }
        } catch let error as BackplaneClientError {
            broadcaster.emit(.subscriptionStatusChanged(error.isTransient ? .offline : .errors))
            throw error
        }
        guard summary.changes > 0 else { return }
        broadcaster.emit(.subscriptionStatusChanged(.started))
        broadcaster.emit(.subscriptionSyncFinished(summary))
    }

    /// One change under the feed's rules (the subscription's, else the configuration's).
    func apply(_ change: EpisodeChange, rules: Subscription?, summary: inout SubscriptionSyncSummary) async throws {
        let result: SubscriptionChangeResult
        let existing = try storage { try $0.item(assetId: change.assetId) }
        switch change.kind {
        case .retracted:
            if let existing, existing.state != .downloaded {
                try storage { try $0.deleteItem(assetId: change.assetId) }
                _ = try? eventLogger.log(.removedFromQueue(assetId: change.assetId))
                broadcaster.emit(.subscriptionAssetDeleted(assetId: change.assetId, feedId: change.feedId, reason: .remote))
                summary.removed += 1
                result = .removed
            } else {
                result = .skipped(reason: existing == nil ? "not held" : "already downloaded")
            }
        case .added, .updated:
            guard let episode = change.episode else { result = .skipped(reason: "no episode"); break }
            let metadata: EpisodeInput?
            do {
                metadata = try await dataSource.metadata(for: episode)
            } catch {
                metadata = nil
            }
            guard let metadata, !metadata.isAssetIdOnly else { result = .skipped(reason: "no download metadata"); break }
            if var existing {
                existing.metadata = metadata
                try storage { try $0.saveItem(existing) }
                result = .updated
                break
            }
            guard await dataSource.willAdd(metadata, feedId: change.feedId) else { result = .skipped(reason: "refused by the data source"); break }
            result = try add(metadata, feedId: change.feedId, rules: rules, summary: &summary)
        }
        await dataSource.didProcess(change, result: result)
    }

    /// Adds an item within the feed's quota: room → queued; full with autodelete → the oldest
    /// counted items are reset (files deleted) first; full without → deferred.
    private func add(_ metadata: EpisodeInput, feedId: String, rules: Subscription?, summary: inout SubscriptionSyncSummary) throws -> SubscriptionChangeResult {
        let quota = rules?.maxItems ?? configuration.subscriptions.maxItemsPerFeed
        let autodelete = rules?.autodeleteOldItems ?? configuration.subscriptions.autodeleteOldItems
        // Only a quota needs the feed's items (the unlimited case must not read them per addition).
        var counted = quota > 0
            ? try storage { try $0.items(feedId: feedId) }.filter { $0.viaSubscription && [.queued, .downloaded].contains($0.state) }
            : []
        var item = SubscriptionItem(assetId: metadata.assetId, feedId: feedId, metadata: metadata, state: .queued, viaSubscription: true, addedAt: Date())
        if quota > 0, counted.count >= quota {
            guard autodelete else {
                item.state = .deferred
                try storage { try $0.saveItem(item) }
                broadcaster.emit(.assetDeferred(item))
                summary.deferred += 1
                return .deferred
            }
            while counted.count >= quota, !counted.isEmpty {
                var oldest = counted.removeFirst()
                let deleted = (try? content?.delete([oldest.assetId])) ?? []
                for assetId in deleted { _ = try? eventLogger.log(.assetDeleted(assetId: assetId, reason: .internal)) }
                oldest.state = .reset
                try storage { try $0.saveItem(oldest) }
                broadcaster.emit(.subscriptionAssetDeleted(assetId: oldest.assetId, feedId: feedId, reason: .internal))
                summary.reset += 1
            }
        }
        try storage { try $0.saveItem(item) }
        _ = try? eventLogger.log(.queuedForDownload(assetId: item.assetId))
        broadcaster.emit(.assetAdded(item))
        summary.added += 1
        return .added
    }
}

/// The cursors of one paging run. A server that hands back the cursor of an earlier page with
/// more to come would have the SDK page forever; so would one whose pages never end.
struct CursorTrail {
    /// Far more than any real run: 1,000 pages of changes or episodes.
    static let maxPages = 1_000
    let route: String
    private var seen: Set<String> = []

    init(route: String, startingAt cursor: String? = nil) {
        self.route = route
        if let cursor { seen.insert(cursor) }
    }

    /// Records the cursor of the next page to ask for.
    mutating func follow(_ cursor: String) throws {
        guard seen.insert(cursor).inserted else {
            throw BackplaneClientError(kind: .invalidResponse, message: "The backplane sent an earlier \(route) cursor again; paging stopped.")
        }
        guard seen.count <= Self.maxPages else {
            throw BackplaneClientError(kind: .invalidResponse, message: "The backplane sent more than \(Self.maxPages) pages of \(route); paging stopped.")
        }
    }
}
