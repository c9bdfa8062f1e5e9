import Foundation

// When a downloaded asset may be played. The application's settings give the defaults; an
// asset's own values (an admin's asset policy, else its episode) override them field by field.

/// How long a downloaded asset stays playable, as it applies to one asset. Durations are in
/// seconds, `-1` is never; absent dates do not limit.
public struct DownloadWindow: Codable, Sendable, Equatable {
    /// Not playable before (it may be downloaded early).
    public var publishDate: Date?
    /// Not playable from then on; the SDK deletes the files as soon as it can.
    public var expiryDate: Date?
    /// Playable for this long after the download completed (EAD).
    public var expiryAfterDownloadSeconds: Int
    /// Playable for this long after the first play started (EAP).
    public var expiryAfterPlaySeconds: Int
    /// A device that has not synced for this long may not play until it syncs.
    public var offlineViewingPeriodSeconds: Int

    public init(
        publishDate: Date? = nil, expiryDate: Date? = nil, expiryAfterDownloadSeconds: Int, expiryAfterPlaySeconds: Int,
        offlineViewingPeriodSeconds: Int
    ) {
        self.publishDate = publishDate
        self.expiryDate = expiryDate
        self.expiryAfterDownloadSeconds = expiryAfterDownloadSeconds
        self.expiryAfterPlaySeconds = expiryAfterPlaySeconds
        self.offlineViewingPeriodSeconds = offlineViewingPeriodSeconds
    }

    /// The application's settings with the asset's own values put over them.
    public init(settings: ApplicationSettings, asset: AssetAvailability?) {
        self.init(
            publishDate: asset?.publishDate, expiryDate: asset?.expiryDate,
            expiryAfterDownloadSeconds: asset?.expiryAfterDownloadSeconds ?? settings.expiryAfterDownloadSeconds,
            expiryAfterPlaySeconds: asset?.expiryAfterPlaySeconds ?? settings.expiryAfterPlaySeconds,
            offlineViewingPeriodSeconds: settings.offlineViewingPeriodSeconds)
    }

    /// Whether anything here limits playback in time (then it needs a trusted clock).
    public var isTimeLimited: Bool {
        publishDate != nil || expiryDate != nil || expiryAfterDownloadSeconds >= 0 || expiryAfterPlaySeconds >= 0
            || offlineViewingPeriodSeconds >= 0
    }
}

/// An asset's own availability, each field overriding the application's setting when present.
public struct AssetAvailability: Codable, Sendable, Equatable {
    public var publishDate: Date?
    public var expiryDate: Date?
    public var expiryAfterDownloadSeconds: Int?
    public var expiryAfterPlaySeconds: Int?

    public init(publishDate: Date? = nil, expiryDate: Date? = nil, expiryAfterDownloadSeconds: Int? = nil, expiryAfterPlaySeconds: Int? = nil) {
        self.publishDate = publishDate
        self.expiryDate = expiryDate
        self.expiryAfterDownloadSeconds = expiryAfterDownloadSeconds
        self.expiryAfterPlaySeconds = expiryAfterPlaySeconds
    }

    /// The first field out of range, with what it must be, or nil: durations are -1 (never) or
    /// 0...Int32.max, dates lie in `WireLimits.acceptedDates`, and the window ends after it starts.
    public var problem: (field: String, message: String)? {
        problem(prefix: "")
    }

    /// `problem`, with field names after `prefix` (`episodes[2].`).
    public func problem(prefix: String) -> (field: String, message: String)? {
        for (name, value) in [("expiryAfterDownloadSeconds", expiryAfterDownloadSeconds), ("expiryAfterPlaySeconds", expiryAfterPlaySeconds)] {
            if let value, value < -1 || value > Int(Int32.max) {
                return (prefix + name, "'\(prefix + name)' must be -1 (never) or between 0 and \(Int32.max).")
            }
        }
        for (name, date) in [("publishDate", publishDate), ("expiryDate", expiryDate)] {
            if let date, !WireLimits.acceptedDates.contains(date) {
                return (prefix + name, WireLimits.dateOutOfRangeMessage(field: prefix + name))
            }
        }
        if let publishDate, let expiryDate, expiryDate <= publishDate {
            return (prefix + "expiryDate", "'\(prefix)expiryDate' must be after its publishDate.")
        }
        return nil
    }

    /// These values, with `other`'s filling what these leave absent. The dates go as a pair:
    /// either of these replaces both of `other`'s, so a window checked in one layer never ends
    /// before it starts once merged.
    public func over(_ other: AssetAvailability?) -> AssetAvailability {
        let datesHere = publishDate != nil || expiryDate != nil
        return AssetAvailability(
            publishDate: datesHere ? publishDate : other?.publishDate, expiryDate: datesHere ? expiryDate : other?.expiryDate,
            expiryAfterDownloadSeconds: expiryAfterDownloadSeconds ?? other?.expiryAfterDownloadSeconds,
            expiryAfterPlaySeconds: expiryAfterPlaySeconds ?? other?.expiryAfterPlaySeconds)
    }
}

extension EpisodeInput {
    /// The episode's availability fields.
    public var availability: AssetAvailability {
        AssetAvailability(
            publishDate: publishDate, expiryDate: expiryDate, expiryAfterDownloadSeconds: expiryAfterDownloadSeconds,
            expiryAfterPlaySeconds: expiryAfterPlaySeconds)
    }
}

/// `PUT /v1/admin/asset-policies/{assetId}`: an admin's rules for one asset, over its episodes'
/// values and the application's settings (absent fields fall through to them). They apply to
/// permissions granted from then on.
public struct AssetPolicy: Codable, Sendable, Equatable {
    public var publishDate: Date?
    public var expiryDate: Date?
    public var expiryAfterDownloadSeconds: Int?
    public var expiryAfterPlaySeconds: Int?
    /// Downloads of this asset one account may make over its lifetime; overrides the
    /// application's `maxLifetimeDownloadsPerAsset` (`-1`: no limit).
    public var maxLifetimeDownloads: Int?

    public init(
        publishDate: Date? = nil, expiryDate: Date? = nil, expiryAfterDownloadSeconds: Int? = nil, expiryAfterPlaySeconds: Int? = nil,
        maxLifetimeDownloads: Int? = nil
    ) {
        self.publishDate = publishDate
        self.expiryDate = expiryDate
        self.expiryAfterDownloadSeconds = expiryAfterDownloadSeconds
        self.expiryAfterPlaySeconds = expiryAfterPlaySeconds
        self.maxLifetimeDownloads = maxLifetimeDownloads
    }

    public var availability: AssetAvailability {
        AssetAvailability(
            publishDate: publishDate, expiryDate: expiryDate, expiryAfterDownloadSeconds: expiryAfterDownloadSeconds,
            expiryAfterPlaySeconds: expiryAfterPlaySeconds)
    }
}

public struct AssetPolicyEntry: Codable, Sendable, Equatable {
    public var assetId: String
    public var policy: AssetPolicy
    public var updatedAt: Date

    public init(assetId: String, policy: AssetPolicy, updatedAt: Date) {
        self.assetId = assetId
        self.policy = policy
        self.updatedAt = updatedAt
    }
}
