import Foundation
import BackplaneWire

/// Subscription sync: subscribing and unsubscribing, the episodes of feeds, and the changes in
/// subscribed feeds applied to the local queue of subscription items under each feed's rules
/// (quota, autodelete) and the app's data source.
struct SubscriptionSync: Sendable {
    let configuration: BackplaneClientConfiguration
    let session: DeviceSession
    let database: SDKDatabase
    let content: ContentStore
    let downloads: DownloadRunner
    let events: EngineEvents
    let lifecycle: EngineLifecycle

    var dataSource: any SubscriptionDataSource { configuration.subscriptions.dataSource ?? BackplaneMetadataDataSource() }

    func subscribe(feedId: String, request: SubscribeRequest) async throws -> Subscription {
        let response = try await session.request { api, credentials in
            try await api.subscribe(feedId: feedId, request, as: credentials)
        }
        var summary = SubscriptionSyncSummary()
        // The server picked the newest within the quota; apply them oldest first, so the local
        // order (which autodelete goes by) follows publication.
        for episode in response.episodes.reversed() {
            let change = EpisodeChange(kind: .added, feedId: feedId, assetId: episode.episode.assetId, episode: episode)
            try await apply(change, rules: response.subscription, summary: &summary)
        }
        await downloadQueuedItems()
        return response.subscription
    }

    func unsubscribe(feedId: String) async throws {
        try await session.request { api, credentials in try await api.unsubscribe(feedId: feedId, as: credentials) }
    }

    func list() async throws -> [Subscription] {
        try await session.request { api, credentials in try await api.subscriptions(as: credentials) }.subscriptions
    }

    func episodes(since date: Date, onlySubscribed: Bool) async throws -> [Episode] {
        var all: [Episode] = []
        var cursor: String?
        var trail = CursorTrail(route: "episodes")
        repeat {
            let pageCursor = cursor
            let page = try await session.request { api, credentials in
                try await api.episodes(since: date, onlySubscribed: onlySubscribed, cursor: pageCursor, as: credentials)
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
    func syncChanges() async throws {
        var cursor: String? = try database.access { try $0.load(String.self, .feedCursor) }
        var summary = SubscriptionSyncSummary()
        var rules: [String: Subscription]?
        var trail = CursorTrail(route: "subscription changes", startingAt: cursor)
        // Status events only when something arrives (or fails): a quiet sync stays quiet.
        do {
            while lifecycle.isRunning {
                let pageCursor = cursor
                let page = try await session.request { api, credentials in
                    try await api.changes(cursor: pageCursor, as: credentials)
                }
                if !page.changes.isEmpty, rules == nil {
                    events.tellApp(.subscriptionStatusChanged(.receiving))
                    rules = Dictionary(try await list().map { ($0.feedId, $0) }, uniquingKeysWith: { first, _ in first })
                }
                for change in page.changes {
                    summary.changes += 1
                    try await apply(change, rules: rules?[change.feedId], summary: &summary)
                }
                cursor = page.cursor
                try database.access { try $0.save(page.cursor, .feedCursor) }
                if !page.hasMore { break }
                try trail.follow(page.cursor)
            }
        } catch let error as BackplaneClientError {
            events.tellApp(.subscriptionStatusChanged(error.isTransient ? .offline : .errors))
            throw error
        }
        await downloadQueuedItems()
        guard summary.changes > 0 else { return }
        events.tellApp(.subscriptionStatusChanged(.started))
        events.tellApp(.subscriptionSyncFinished(summary))
    }

    /// One change under the feed's rules (the subscription's, else the configuration's).
    func apply(_ change: EpisodeChange, rules: Subscription?, summary: inout SubscriptionSyncSummary) async throws {
        let result: SubscriptionChangeResult
        let existing = try database.access { try $0.item(assetId: change.assetId) }
        switch change.kind {
        case .retracted:
            if let existing, existing.state != .downloaded {
                try database.access { try $0.deleteItem(assetId: change.assetId) }
                // The download queue logs the removal of what it held.
                if try await downloads.remove(.queued([change.assetId]), reason: .remote).dequeued.isEmpty {
                    events.log(.removedFromQueue(assetId: change.assetId))
                }
                events.tellApp(.subscriptionAssetDeleted(assetId: change.assetId, feedId: change.feedId, reason: .remote))
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
                try database.access { try $0.saveItem(existing) }
                // The CMS may move an episode's window after its download (a new expiry date).
                if metadata.availability.problem == nil {
                    try database.access { try $0.updateAvailability(metadata.downloadAvailability, assetId: metadata.assetId) }
                }
                result = .updated
                break
            }
            guard await dataSource.willAdd(metadata, feedId: change.feedId) else { result = .skipped(reason: "refused by the data source"); break }
            result = try await add(metadata, feedId: change.feedId, rules: rules, summary: &summary)
        default:
            result = .skipped(reason: "a change of kind '\(change.kind)' this SDK does not know")
        }
        await dataSource.didProcess(change, result: result)
    }

    /// Adds an item within the feed's quota: room → queued; full with autodelete → the oldest
    /// counted items are reset (files deleted) first; full without → deferred.
    private func add(
        _ metadata: EpisodeInput, feedId: String, rules: Subscription?, summary: inout SubscriptionSyncSummary
    ) async throws -> SubscriptionChangeResult {
        let quota = rules?.maxItems ?? configuration.subscriptions.maxItemsPerFeed
        let autodelete = rules?.autodeleteOldItems ?? configuration.subscriptions.autodeleteOldItems
        // Only a quota needs the feed's items (the unlimited case must not read them per addition).
        var counted = quota > 0
            ? try database.access { try $0.items(feedId: feedId) }.filter { $0.viaSubscription && [.queued, .downloaded].contains($0.state) }
            : []
        var item = SubscriptionItem(assetId: metadata.assetId, feedId: feedId, metadata: metadata, state: .queued, viaSubscription: true, addedAt: Date())
        if quota > 0, counted.count >= quota {
            guard autodelete else {
                item.state = .deferred
                try database.access { try $0.saveItem(item) }
                events.tellApp(.assetDeferred(item))
                summary.deferred += 1
                return .deferred
            }
            while counted.count >= quota, !counted.isEmpty {
                var oldest = counted.removeFirst()
                // Downloaded or still downloading: either way its files go (a file that cannot be
                // deleted now does not stop the feed's sync).
                _ = try? await downloads.remove(.assets([oldest.assetId]), reason: .internal)
                oldest.state = .reset
                try database.access { try $0.saveItem(oldest) }
                events.tellApp(.subscriptionAssetDeleted(assetId: oldest.assetId, feedId: feedId, reason: .internal))
                summary.reset += 1
            }
        }
        try database.access { try $0.saveItem(item) }
        // An item that cannot be downloaded (no URL) is queued only here; the download queue
        // logs the others when it takes them (`downloadQueuedItems`).
        if metadata.downloadRequest == nil { events.log(.queuedForDownload(assetId: item.assetId)) }
        events.tellApp(.assetAdded(item))
        summary.added += 1
        return .added
    }
}

extension SubscriptionSync {
    /// Hands the queued items the download queue does not hold yet to it (the engine downloads
    /// them with no app code); the download marks its item downloaded when it completes. Runs
    /// after each subscription sync, so an item whose asset could not be queued (its origin
    /// down) is tried again at the next.
    func downloadQueuedItems() async {
        let items = (try? database.reconcileSubscriptionItems()) ?? []
        for item in items where lifecycle.isRunning {
            guard let request = item.metadata.downloadRequest else { continue }
            _ = try? await downloads.enqueue(request, at: nil)
        }
    }
}

extension EpisodeInput {
    /// What to download for an episode with a download URL.
    var downloadRequest: DownloadRequest? {
        guard let downloadURL, let url = URL(string: downloadURL), let kind = DownloadRequest.Kind(mediaType) else { return nil }
        var metadata: [String: String] = [:]
        if let title { metadata["title"] = String(title.prefix(200)) }
        return DownloadRequest(
            assetId: assetId, url: url, kind: kind,
            allowedMIMETypes: permittedMimeTypes.map { Set($0.map { $0.lowercased() }) }, maxVideoBitrate: maxBitrate,
            metadata: metadata, declaredSize: sizeBytes, availability: downloadAvailability)
    }

    /// The episode's availability, nil when it sets none.
    var downloadAvailability: AssetAvailability? {
        availability == AssetAvailability() ? nil : availability
    }
}

extension DownloadRequest {
    /// The episode an item tracking this download stands for (`EpisodeInput.downloadRequest`
    /// the other way round).
    var episode: EpisodeInput {
        EpisodeInput(
            assetId: assetId, title: metadata["title"], downloadURL: url.absoluteString, mediaType: MediaType(kind),
            permittedMimeTypes: allowedMIMETypes?.sorted(), maxBitrate: maxVideoBitrate, publishDate: availability?.publishDate,
            expiryDate: availability?.expiryDate, expiryAfterDownloadSeconds: availability?.expiryAfterDownloadSeconds,
            expiryAfterPlaySeconds: availability?.expiryAfterPlaySeconds, sizeBytes: declaredSize)
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

extension DownloadRequest.Kind {
    /// The kind of download an episode's media type is; nil for a media type of a later
    /// backplane, which this SDK cannot download (the item is tracked, not downloaded).
    init?(_ mediaType: MediaType?) {
        switch mediaType {
        case .hls: self = .hls
        case .dash: self = .dash
        case .smooth: self = .smooth
        case .file, nil: self = .file
        default: return nil
        }
    }
}

extension MediaType {
    init(_ kind: DownloadRequest.Kind) {
        self = switch kind {
        case .file: .file
        case .hls: .hls
        case .dash: .dash
        case .smooth: .smooth
        default: MediaType(rawValue: kind.rawValue)
        }
    }
}
