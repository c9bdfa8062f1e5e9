import Foundation
import BackplaneWire

/// The applications' push credentials, and when each device was last pushed: shared by the
/// nodes, so that one push per device per interval holds whichever node sends it.
public protocol PushStore: Sendable {
    /// The application's credentials, one per provider at most.
    func pushCredentials(applicationId: String) async throws -> [PushCredentialsRecord]
    /// Replaces the application's credentials for the record's provider (its application must exist).
    func setPushCredentials(_ record: PushCredentialsRecord) async throws
    /// False when there were none.
    func deletePushCredentials(applicationId: String, provider: PushProvider) async throws -> Bool
    /// Marks the credentials set at `setAt` broken; credentials set since (by an admin who fixed
    /// them) are left alone. False when nothing was marked.
    func markPushCredentialsBroken(
        applicationId: String, provider: PushProvider, setAt: Date, broken: PushCredentialsBroken
    ) async throws -> Bool

    /// Takes the right to push a device now: granted, and recorded, when its last push is at
    /// least `spacing` before `now` (or it was never pushed). Refused: the time of its last push.
    func claimPush(applicationId: String, deviceId: String, now: Date, spacing: Duration) async throws -> PushClaim
}

public enum PushClaim: Sendable, Equatable {
    case granted
    case refused(lastPushAt: Date)
}

/// One provider's credentials for an application. `secret` is the JSON the admin sent (the
/// APNs key with its ids, or the Google service account), kept as is like an app key: signing
/// needs it. Protect the data directory.
public struct PushCredentialsRecord: Sendable, Equatable, Codable {
    public var applicationId: String
    public var provider: PushProvider
    public var secret: String
    public var setAt: Date
    public var brokenAt: Date?
    public var brokenReason: String?

    public init(
        applicationId: String, provider: PushProvider, secret: String, setAt: Date, brokenAt: Date? = nil, brokenReason: String? = nil
    ) {
        self.applicationId = applicationId
        self.provider = provider
        self.secret = secret
        self.setAt = setAt
        self.brokenAt = brokenAt
        self.brokenReason = brokenReason
    }

    public var broken: PushCredentialsBroken? {
        brokenAt.map { PushCredentialsBroken(since: $0, reason: brokenReason ?? "") }
    }
}

extension Duration {
    /// Whole milliseconds, for the stores' integer times (a push spacing of seconds).
    var wholeMilliseconds: Int64 {
        components.seconds.multipliedReportingOverflow(by: 1000).overflow
            ? .max : components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
