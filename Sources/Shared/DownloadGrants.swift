import Foundation

// Download permissions: a device asks the backplane before it downloads an asset; the answer is
// a grant (with the counts and a signed entitlement) or a denial naming the rule. The device
// reports what became of each grant in its syncs, as it acknowledges commands.

/// `POST /v1/download-grants`: may this device download `assetId`?
public struct DownloadPermissionRequest: Codable, Sendable, Equatable {
    public var assetId: String
    /// A tighter lifetime limit the app puts on itself for this asset (from its own asset
    /// metadata): it can only tighten the application's setting, never loosen it, so it binds an
    /// honest app only; the application's limit binds every caller.
    public var maxLifetimeDownloads: Int?
    /// Renew only: the grant of `assetId` this device holds, answered again with a fresh
    /// entitlement. Never creates a grant: 409 `conflict` when that grant has ended.
    public var grantId: String?

    /// The largest `maxLifetimeDownloads` a request may carry.
    public static let maxLifetimeDownloadsLimit = 1_000_000

    public init(assetId: String, maxLifetimeDownloads: Int? = nil, grantId: String? = nil) {
        self.assetId = assetId
        self.maxLifetimeDownloads = maxLifetimeDownloads
        self.grantId = grantId
    }
}

/// The rules a download permission is checked against, in the order they are checked.
public struct DownloadRule: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Downloads of one asset by one account, ever (`maxLifetimeDownloadsPerAsset`): permanent
    /// until an admin resets the count.
    public static let assetLifetime = DownloadRule(rawValue: "assetLifetime")
    /// Assets held at once across the account's devices (`maxDownloadsPerAccount`).
    public static let account = DownloadRule(rawValue: "account")
    /// Copies of one asset held at once across the account's devices (`maxCopiesPerAccount`).
    public static let copies = DownloadRule(rawValue: "copies")
    /// Assets held at once on the device (`maxDownloadsPerDevice`).
    public static let device = DownloadRule(rawValue: "device")
    public static let allCases: [DownloadRule] = [.assetLifetime, .account, .copies, .device]

    /// A denial by this rule lasts until an admin resets the count; the others may clear once a
    /// held download is deleted, fails or is released.
    public var isPermanent: Bool { self == .assetLifetime }
}

/// How much of a limit is used. `limit` is `-1` when there is none.
public struct DownloadCount: Codable, Sendable, Equatable {
    public var used: Int
    public var limit: Int

    public init(used: Int, limit: Int) {
        self.used = used
        self.limit = limit
    }

    /// One more would go over the limit.
    public var isFull: Bool { limit >= 0 && used >= limit }
}

/// The counts of every rule, as they stand after the answer (a grant is counted in them).
public struct DownloadCounts: Codable, Sendable, Equatable {
    public var assetLifetime: DownloadCount
    public var account: DownloadCount
    public var copies: DownloadCount
    public var device: DownloadCount

    public init(assetLifetime: DownloadCount, account: DownloadCount, copies: DownloadCount, device: DownloadCount) {
        self.assetLifetime = assetLifetime
        self.account = account
        self.copies = copies
        self.device = device
    }

    /// The count of a rule; a rule a later backplane added has none here (no limit, none used).
    public subscript(rule: DownloadRule) -> DownloadCount {
        switch rule {
        case .assetLifetime: assetLifetime
        case .account: account
        case .copies: copies
        case .device: device
        default: DownloadCount(used: 0, limit: -1)
        }
    }
}

/// Where a grant is. `active` and `completed` grants hold a download (they count); the others
/// have ended and free their place. Every grant stays in the asset's lifetime count (a failed
/// download too: a permission was spent) until an admin resets it.
public struct DownloadGrantState: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Granted; the download is under way.
    public static let active = DownloadGrantState(rawValue: "active")
    /// The download completed: the asset is on the device.
    public static let completed = DownloadGrantState(rawValue: "completed")
    /// The download failed.
    public static let failed = DownloadGrantState(rawValue: "failed")
    /// The asset was deleted from the device.
    public static let deleted = DownloadGrantState(rawValue: "deleted")
    /// Ended by the backplane: the device was wiped, killed, unregistered or moved to another
    /// user, or deleted the asset on command.
    public static let released = DownloadGrantState(rawValue: "released")
    public static let allCases: [DownloadGrantState] = [.active, .completed, .failed, .deleted, .released]

    public var holdsDownload: Bool { self == .active || self == .completed }
}

/// A granted download.
public struct DownloadGrant: Codable, Sendable, Equatable {
    public var grantId: String
    public var assetId: String
    public var deviceId: String
    public var userId: String
    public var state: DownloadGrantState
    public var grantedAt: Date
    public var updatedAt: Date
    public var window: DownloadWindow
    /// A compact JWS (EdDSA) signed by the backplane that says this device held a grant of this
    /// asset when it was issued (it expires after `Entitlements` lifetime, an hour): a DRM
    /// license server checks it with the keys at `/v1/applications/{applicationId}/entitlement-keys`
    /// before it issues a persistent license. Absent once the grant has ended.
    public var entitlement: String?

    public init(
        grantId: String, assetId: String, deviceId: String, userId: String, state: DownloadGrantState, grantedAt: Date,
        updatedAt: Date, window: DownloadWindow, entitlement: String?
    ) {
        self.grantId = grantId
        self.assetId = assetId
        self.deviceId = deviceId
        self.userId = userId
        self.state = state
        self.grantedAt = grantedAt
        self.updatedAt = updatedAt
        self.window = window
        self.entitlement = entitlement
    }
}

/// The answer to a permission request that is granted: 201 for a new grant, 200 when the device
/// already held one for the asset (asking again is safe).
public struct DownloadPermissionResponse: Codable, Sendable, Equatable {
    public var grant: DownloadGrant
    public var counts: DownloadCounts

    public init(grant: DownloadGrant, counts: DownloadCounts) {
        self.grant = grant
        self.counts = counts
    }
}

/// What became of a granted download, reported by the device in a sync.
public struct DownloadReport: Codable, Sendable, Equatable {
    public struct Outcome: WireVocabulary {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        public static let completed = Outcome(rawValue: "completed")
        public static let failed = Outcome(rawValue: "failed")
        public static let deleted = Outcome(rawValue: "deleted")
        public static let allCases: [Outcome] = [.completed, .failed, .deleted]
    }

    public var grantId: String
    public var outcome: Outcome

    public init(grantId: String, outcome: Outcome) {
        self.grantId = grantId
        self.outcome = outcome
    }
}

/// One per report sent. Like command acknowledgements: send a report until its result comes back.
public struct DownloadReportResult: Codable, Sendable, Equatable {
    public struct Status: WireVocabulary {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// Recorded.
        public static let accepted = Status(rawValue: "accepted")
        /// The grant is already there (a repeated report), or was released; nothing changed.
        public static let duplicate = Status(rawValue: "duplicate")
        /// Not this device's grant, or a step the grant cannot take (completed after deleted,
        /// completed after failed); nothing changed.
        public static let rejected = Status(rawValue: "rejected")
        public static let allCases: [Status] = [.accepted, .duplicate, .rejected]
    }

    public var grantId: String
    public var status: Status
    public var state: DownloadGrantState?
    public var message: String?

    public init(grantId: String, status: Status, state: DownloadGrantState? = nil, message: String? = nil) {
        self.grantId = grantId
        self.status = status
        self.state = state
        self.message = message
    }
}

/// `GET /v1/applications/{applicationId}/entitlement-keys`: the public keys that verify
/// entitlements, as a JSON Web Key Set (RFC 7517; Ed25519 keys as RFC 8037 `OKP` keys).
public struct EntitlementKeySet: Codable, Sendable, Equatable {
    public struct Key: Codable, Sendable, Equatable {
        public var kty: String
        public var crv: String
        /// The public key, base64url without padding.
        public var x: String
        public var kid: String
        public var alg: String
        public var use: String

        public init(kty: String = "OKP", crv: String = "Ed25519", x: String, kid: String, alg: String = "EdDSA", use: String = "sig") {
            self.kty = kty
            self.crv = crv
            self.x = x
            self.kid = kid
            self.alg = alg
            self.use = use
        }
    }

    public var keys: [Key]

    public init(keys: [Key]) {
        self.keys = keys
    }
}

/// The claims of an entitlement (the JWS payload). Times are seconds since 1970 (JWT NumericDate).
public struct EntitlementClaims: Codable, Sendable, Equatable {
    /// Always `backplane`.
    public var iss: String
    /// The application id.
    public var aud: String
    /// The user id.
    public var sub: String
    /// The grant id.
    public var jti: String
    /// When the token was issued.
    public var iat: Int64
    /// When the token stops being accepted: it proves a grant held at `iat`, for a license
    /// request made soon after. A device asks again (same grant, new token) to renew.
    public var exp: Int64
    public var deviceId: String
    public var assetId: String
    public var window: DownloadWindow

    public static let issuer = "backplane"

    public init(aud: String, sub: String, jti: String, iat: Int64, exp: Int64, deviceId: String, assetId: String, window: DownloadWindow) {
        self.iss = Self.issuer
        self.aud = aud
        self.sub = sub
        self.jti = jti
        self.iat = iat
        self.exp = exp
        self.deviceId = deviceId
        self.assetId = assetId
        self.window = window
    }
}

/// `GET /v1/admin/download-grants`: grants of a user or a device, newest first.
public struct DownloadGrantPage: Codable, Sendable, Equatable {
    public var grants: [DownloadGrant]
    /// Pass as `cursor` for the next page; absent on the last.
    public var nextCursor: String?

    public init(grants: [DownloadGrant], nextCursor: String?) {
        self.grants = grants
        self.nextCursor = nextCursor
    }
}

/// `POST /v1/admin/download-grants/reset-lifetime`: the user may download the asset again as
/// if never before (the lifetime rule is the one an admin has to reset).
public struct LifetimeResetRequest: Codable, Sendable, Equatable {
    public var userId: String
    public var assetId: String

    public init(userId: String, assetId: String) {
        self.userId = userId
        self.assetId = assetId
    }
}

public struct LifetimeResetResponse: Codable, Sendable, Equatable {
    public var userId: String
    public var assetId: String
    /// Grants taken out of the lifetime count.
    public var resetGrants: Int

    public init(userId: String, assetId: String, resetGrants: Int) {
        self.userId = userId
        self.assetId = assetId
        self.resetGrants = resetGrants
    }
}

/// `POST /v1/admin/download-grants/{grantId}/revoke`: the device is told to delete the asset (a
/// `deleteAssets` command, sent at its next sync or at once over its channel); the grant is
/// `released` when the device acknowledges the deletion.
public struct RevokedGrant: Codable, Sendable, Equatable {
    public var grant: DownloadGrant
    public var command: Command

    public init(grant: DownloadGrant, command: Command) {
        self.grant = grant
        self.command = command
    }
}
