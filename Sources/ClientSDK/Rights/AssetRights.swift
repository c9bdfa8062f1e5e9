import Foundation
import BackplaneWire

/// Whether a downloaded asset may be played now, and if not, why.
public enum AssetRights: Sendable, Equatable {
    /// Playable; until the instant given, when a window ends it (nil: no end).
    case valid(until: Date?)
    /// Downloaded early: playable from its publish date.
    case notYetAvailable(from: Date)
    /// Its window ended; the expiry sweep deletes its files.
    case expired(ExpiryReason)
    /// The device has not synced for the application's offline viewing period; a sync unlocks it.
    case offlinePeriodExceeded(lastSync: Date)
    /// Its window needs the time, and the device has no trusted time (never synced, or its clock
    /// was changed since the last sync); a sync restores it.
    case untrustedTime(UntrustedReason)
    /// Not on the device (not downloaded, or deleted).
    case noRights
    /// Its license ended (then, when known): it ran out offline without a renewal, or the
    /// backplane ended it (a revoked grant, a wipe, the window over), and its keys are gone.
    case licenseExpired(at: Date?)

    public var isPlayable: Bool {
        if case .valid = self { return true }
        return false
    }

    /// A stable name, e.g. for the harness.
    public var name: String {
        switch self {
        case .valid: "valid"
        case .notYetAvailable: "notYetAvailable"
        case .expired: "expired"
        case .offlinePeriodExceeded: "offlinePeriodExceeded"
        case .untrustedTime: "untrustedTime"
        case .noRights: "noRights"
        case .licenseExpired: "licenseExpired"
        }
    }
}

/// Which end of the window passed.
public struct ExpiryReason: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The asset's expiry date.
    public static let expiryDate = ExpiryReason(rawValue: "expiryDate")
    /// Expiry after download (EAD).
    public static let afterDownload = ExpiryReason(rawValue: "afterDownload")
    /// Expiry after first play (EAP).
    public static let afterPlay = ExpiryReason(rawValue: "afterPlay")
    public static let allCases: [ExpiryReason] = [.expiryDate, .afterDownload, .afterPlay]
}

/// What the rights of one downloaded asset are judged on.
struct RightsFacts: Sendable, Equatable {
    var window: DownloadWindow
    /// When its download completed (trusted time when there was any).
    var downloadedAt: Date
    /// When it was first played (trusted time), if it was.
    var firstPlayedAt: Date?

    /// The instants that end the window, with why.
    var ends: [(Date, ExpiryReason)] {
        var ends: [(Date, ExpiryReason)] = []
        if let expiry = window.expiryDate { ends.append((expiry, .expiryDate)) }
        if window.expiryAfterDownloadSeconds >= 0 {
            ends.append((downloadedAt.addingTimeInterval(TimeInterval(window.expiryAfterDownloadSeconds)), .afterDownload))
        }
        if window.expiryAfterPlaySeconds >= 0, let firstPlayedAt {
            ends.append((firstPlayedAt.addingTimeInterval(TimeInterval(window.expiryAfterPlaySeconds)), .afterPlay))
        }
        return ends
    }

    /// The rights at `now` under a license too: its end joins the window's (a license that
    /// does not end, or content that needs none, changes nothing).
    func rights(at now: TrustedTime, lastSync: Date?, license: LicenseState?) -> AssetRights {
        if case .ended = license { return .licenseExpired(at: nil) }
        let rights = rights(at: now, lastSync: lastSync)
        guard case .valid(let until) = rights, case .acquired(let end?) = license else { return rights }
        // A license's end is judged on trusted time, as a window's is.
        guard let date = now.date else {
            if case .untrusted(let reason) = now { return .untrustedTime(reason) }
            return .untrustedTime(.neverSynced)
        }
        if end <= date { return .licenseExpired(at: end) }
        return .valid(until: min(until ?? end, end))
    }

    /// The rights at `now`, with the last sync's (trusted) time for the offline period.
    func rights(at now: TrustedTime, lastSync: Date?) -> AssetRights {
        guard window.isTimeLimited else { return .valid(until: nil) }
        guard let now = now.date else {
            if case .untrusted(let reason) = now { return .untrustedTime(reason) }
            return .untrustedTime(.neverSynced)
        }
        if let ended = ends.filter({ $0.0 <= now }).min(by: { $0.0 < $1.0 }) { return .expired(ended.1) }
        if let publish = window.publishDate, now < publish { return .notYetAvailable(from: publish) }
        var until = ends.map(\.0).min()
        if window.offlineViewingPeriodSeconds >= 0 {
            guard let lastSync else { return .untrustedTime(.neverSynced) }
            let locksAt = lastSync.addingTimeInterval(TimeInterval(window.offlineViewingPeriodSeconds))
            if locksAt <= now { return .offlinePeriodExceeded(lastSync: lastSync) }
            until = min(until ?? locksAt, locksAt)
        }
        return .valid(until: until)
    }
}
