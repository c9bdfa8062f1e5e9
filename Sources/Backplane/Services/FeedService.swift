import Foundation
import BackplaneWire

/// The CMS side of subscriptions: feeds and their episodes. Every episode write is appended to
/// the change log (in the same transaction) and wakes the feed's subscribers.
public struct FeedService: Sendable {
    public let store: any BackplaneStore
    let wakeUps: any WakeUpPublisher
    let now: @Sendable () -> Date

    public init(store: any BackplaneStore, wakeUps: any WakeUpPublisher, now: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.wakeUps = wakeUps
        self.now = now
    }

    /// Creates or replaces a feed; `created` is true for a new (or undeleted) feed.
    public func putFeed(applicationId: String, feedId: String, _ input: FeedInput) async throws -> (Feed, created: Bool) {
        try Validate.identifier(feedId, field: "feedId")
        try Validate.text(input.title, field: "title", maxLength: WireLimits.maxTitleLength)
        try Self.validateFields(input.metadata, field: "metadata")
        let now = now()
        let (record, created) = try await store.upsertFeed(FeedRecord(
            applicationId: applicationId, feedId: feedId, title: input.title, metadata: input.metadata, createdAt: now, updatedAt: now))
        return (record.wire, created)
    }

    public func feed(applicationId: String, feedId: String) async throws -> Feed {
        try await liveFeed(applicationId, feedId).wire
    }

    public func feeds(applicationId: String) async throws -> FeedList {
        FeedList(feeds: try await store.feeds(applicationId: applicationId).map(\.wire))
    }

    /// Deletes a feed: its episodes are retracted for every subscriber.
    public func deleteFeed(applicationId: String, feedId: String) async throws {
        let subscribers = try await store.subscriberIds(applicationId: applicationId, feedId: feedId)
        guard try await store.deleteFeed(applicationId: applicationId, feedId: feedId, at: now()) else {
            throw ServiceError.notFound("No feed '\(feedId)'.")
        }
        wake(applicationId, subscribers)
    }

    /// Publishes a batch: new asset ids are added, known ones replaced (an identical one is left
    /// alone), retracted ones added again. Returns the episodes written.
    public func publish(applicationId: String, feedId: String, _ request: PublishEpisodesRequest) async throws -> EpisodeList {
        guard request.episodes.count <= WireLimits.maxEpisodesPerBatch else {
            throw ServiceError(.payloadTooLarge,
                "At most \(WireLimits.maxEpisodesPerBatch) episodes per batch; this one has \(request.episodes.count).",
                details: ["limit": .int(Int64(WireLimits.maxEpisodesPerBatch))])
        }
        guard !request.episodes.isEmpty else { throw ServiceError.validation("'episodes' must not be empty.", field: "episodes") }
        for (index, episode) in request.episodes.enumerated() { try Self.validate(episode, at: "episodes[\(index)]") }
        let assetIds = request.episodes.map(\.assetId)
        guard Set(assetIds).count == assetIds.count else {
            throw ServiceError.validation("An asset id appears twice in the batch.", field: "episodes")
        }
        _ = try await liveFeed(applicationId, feedId)
        let now = now()
        let writes = try await store.writeEpisodes(applicationId: applicationId, feedId: feedId, assetIds: assetIds) { existing in
            request.episodes.compactMap { input in
                if let current = existing[input.assetId], current.retractedAt == nil {
                    guard current.episode != input else { return nil }
                    var record = current
                    record.episode = input
                    record.updatedAt = now
                    return EpisodeWrite(record: record, kind: .updated)
                }
                return EpisodeWrite(
                    record: EpisodeRecord(
                        applicationId: applicationId, feedId: feedId, assetId: input.assetId, episode: input,
                        announcedAt: now, updatedAt: now),
                    kind: .added)
            }
        }
        try await wakeSubscribers(applicationId, feedId, if: !writes.isEmpty)
        return EpisodeList(episodes: writes.map(\.record.wire))
    }

    /// Replaces one live episode; the path names it, and the body's `assetId` must agree.
    public func updateEpisode(applicationId: String, feedId: String, assetId: String, _ input: EpisodeInput) async throws -> Episode {
        guard input.assetId == assetId else {
            throw ServiceError.validation("The body's assetId '\(input.assetId)' is not the path's '\(assetId)'.", field: "assetId")
        }
        try Self.validate(input, at: "episode")
        _ = try await liveFeed(applicationId, feedId)
        let now = now()
        let writes = try await store.writeEpisodes(applicationId: applicationId, feedId: feedId, assetIds: [assetId]) { existing in
            guard var record = existing[assetId], record.retractedAt == nil else {
                throw ServiceError.notFound("No episode '\(assetId)' in feed '\(feedId)'.")
            }
            guard record.episode != input else { return [] }
            record.episode = input
            record.updatedAt = now
            return [EpisodeWrite(record: record, kind: .updated)]
        }
        try await wakeSubscribers(applicationId, feedId, if: !writes.isEmpty)
        if let written = writes.first { return written.record.wire }
        return try await episode(applicationId, feedId, assetId)
    }

    /// Retracts an episode: devices remove it if they have not downloaded it yet.
    public func retractEpisode(applicationId: String, feedId: String, assetId: String) async throws {
        _ = try await liveFeed(applicationId, feedId)
        let now = now()
        _ = try await store.writeEpisodes(applicationId: applicationId, feedId: feedId, assetIds: [assetId]) { existing in
            guard var record = existing[assetId], record.retractedAt == nil else {
                throw ServiceError.notFound("No episode '\(assetId)' in feed '\(feedId)'.")
            }
            record.retractedAt = now
            record.updatedAt = now
            return [EpisodeWrite(record: record, kind: .retracted)]
        }
        try await wakeSubscribers(applicationId, feedId, if: true)
    }

    /// One page of a feed's live episodes, oldest update first, after the cursor's position
    /// (`EpisodeCursor`); `nextCursor` is nil on the last page.
    public func episodePage(
        applicationId: String, feedId: String, cursor: String?, limit: Int = WireLimits.defaultPageSize
    ) async throws -> (episodes: [EpisodeRecord], nextCursor: String?) {
        let after = try cursor.map(EpisodeCursor.decode)
        let rows = try await store.episodes(
            applicationId: applicationId, updatedSince: Date(timeIntervalSince1970: 0), feedIds: [feedId], after: after, limit: limit + 1)
        let page = Array(rows.prefix(limit))
        let next = rows.count > limit
            ? page.last.map { EpisodeCursor.encode(EpisodeKey(updatedAt: $0.updatedAt, feedId: $0.feedId, assetId: $0.assetId)) } : nil
        return (page, next)
    }

    /// Whether the feed has a live (published, not retracted) episode of this asset.
    public func hasLiveEpisode(applicationId: String, feedId: String, assetId: String) async throws -> Bool {
        try await store.episode(applicationId: applicationId, feedId: feedId, assetId: assetId).map { $0.retractedAt == nil } ?? false
    }

    // MARK: helpers

    private func episode(_ applicationId: String, _ feedId: String, _ assetId: String) async throws -> Episode {
        guard let record = try await store.episode(applicationId: applicationId, feedId: feedId, assetId: assetId),
              record.retractedAt == nil
        else { throw ServiceError.notFound("No episode '\(assetId)' in feed '\(feedId)'.") }
        return record.wire
    }

    private func liveFeed(_ applicationId: String, _ feedId: String) async throws -> FeedRecord {
        guard let feed = try await store.feed(applicationId: applicationId, feedId: feedId), feed.deletedAt == nil else {
            throw ServiceError.notFound("No feed '\(feedId)'.")
        }
        return feed
    }

    private func wakeSubscribers(_ applicationId: String, _ feedId: String, if changed: Bool) async throws {
        guard changed else { return }
        wake(applicationId, try await store.subscriberIds(applicationId: applicationId, feedId: feedId))
    }

    private func wake(_ applicationId: String, _ deviceIds: [String]) {
        guard !deviceIds.isEmpty else { return }
        wakeUps.publish(.devices(applicationId: applicationId, deviceIds: deviceIds))
    }

    static func validate(_ episode: EpisodeInput, at path: String) throws {
        try Validate.identifier(episode.assetId, field: "\(path).assetId")
        try Validate.optionalText(episode.title, field: "\(path).title", maxLength: WireLimits.maxTitleLength)
        try Validate.optionalText(episode.description.map { $0.replacingOccurrences(of: "\n", with: " ") }, field: "\(path).description",
                                  maxLength: WireLimits.maxDescriptionLength)
        if let url = episode.downloadURL {
            guard url.utf8.count <= WireLimits.maxURLLength, let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme?.lowercased()),
                  parsed.host != nil
            else { throw ServiceError.validation("'\(path).downloadURL' must be an http(s) URL of at most \(WireLimits.maxURLLength) bytes.", field: "\(path).downloadURL") }
            guard episode.mediaType != nil else {
                throw ServiceError.validation("'\(path).mediaType' (file, hls, dash or smooth) is required with a downloadURL.", field: "\(path).mediaType")
            }
        }
        if let mimeTypes = episode.permittedMimeTypes, mimeTypes.count > WireLimits.maxMimeTypesPerEpisode {
            throw ServiceError.validation(
                "'\(path).permittedMimeTypes' holds at most \(WireLimits.maxMimeTypesPerEpisode) entries; this one has \(mimeTypes.count).",
                field: "\(path).permittedMimeTypes")
        }
        for mime in episode.permittedMimeTypes ?? [] {
            try Validate.text(mime, field: "\(path).permittedMimeTypes", maxLength: WireLimits.maxShortTextLength)
        }
        if let bitrate = episode.maxBitrate, bitrate < 0 {
            throw ServiceError.validation("'\(path).maxBitrate' must not be negative.", field: "\(path).maxBitrate")
        }
        if let size = episode.sizeBytes, size < 0 {
            throw ServiceError.validation("'\(path).sizeBytes' must not be negative.", field: "\(path).sizeBytes")
        }
        try Validate.availability(episode.availability, maxLifetimeDownloads: episode.maxLifetimeDownloads, at: "\(path).")
        try validateFields(episode.customFields, field: "\(path).customFields")
    }

    static func validateFields(_ fields: [String: JSONValue]?, field: String) throws {
        guard let fields else { return }
        let size = (try? JSONEncoder().encode(fields).count) ?? Int.max
        guard size <= WireLimits.maxCustomFieldsBytes else {
            throw ServiceError.validation("'\(field)' is larger than \(WireLimits.maxCustomFieldsBytes) bytes as JSON.", field: field)
        }
    }
}

extension FeedRecord {
    var wire: Feed { Feed(feedId: feedId, title: title, metadata: metadata, createdAt: createdAt, updatedAt: updatedAt) }
}

extension EpisodeRecord {
    var wire: Episode { Episode(feedId: feedId, episode: episode, announcedAt: announcedAt, updatedAt: updatedAt) }
}
