import Foundation
import BackplaneWire

/// A device's sync, as one store call: one transaction reads what the sync needs
/// (`SyncSnapshot`), asks the plan's rules what to change (`SyncPlan.decide`, written once in
/// `Services/Sync/`), writes it, and spends the request's nonce with it. A sync that changes
/// nothing is a read, and spends its nonce as `recordSignedRequest` would.
public protocol SyncStore: Sendable {
    /// Refusals: `NonceReusedError` and `SignedBeforeRestartError` as `recordSignedRequest`'s,
    /// `StoreError.unknownDevice` when the device is gone; each changes nothing.
    func sync(_ plan: SyncPlan, spending nonce: SignedRequestRecord?) async throws -> SyncDecision
}

extension BackplaneStore {
    /// A sync without reports or acks, decided from what sign-in read: when that changes nothing
    /// (no command delivered or expired, no new version), its nonce is spent on its own and
    /// nothing is written. Nil when the sync must run its transaction. The first step of every
    /// store's `sync`.
    func quietSync(_ plan: SyncPlan, spending nonce: SignedRequestRecord?) async throws -> SyncDecision? {
        guard plan.mayBeQuiet, let signedIn = plan.signedIn else { return nil }
        let decision = plan.decide(signedIn)
        guard decision.changesNothing else { return nil }
        if let nonce, try await !recordSignedRequest(nonce) { throw NonceReusedError() }
        return decision
    }
}

/// What a sync reads and how it decides.
public struct SyncPlan: Sendable {
    public var applicationId: String
    public var deviceId: String
    /// The device and its open commands as this request's sign-in read them, moments ago
    /// (`deviceWithOpenCommands`). A sync without reports or acks decides from them, reading
    /// nothing (`quietSync`); if that decision changes anything, the store reads everything again
    /// in its write.
    public var signedIn: SyncSnapshot?
    /// The grants the download reports name, and the commands the acks name, to read.
    public var reportedGrantIds: [String]
    public var ackedCommandIds: [String]
    /// The rules: a pure function of what was read.
    public var decide: @Sendable (SyncSnapshot) -> SyncDecision

    public init(
        applicationId: String, deviceId: String, signedIn: SyncSnapshot?, reportedGrantIds: [String], ackedCommandIds: [String],
        decide: @escaping @Sendable (SyncSnapshot) -> SyncDecision
    ) {
        self.applicationId = applicationId
        self.deviceId = deviceId
        self.signedIn = signedIn
        self.reportedGrantIds = reportedGrantIds
        self.ackedCommandIds = ackedCommandIds
        self.decide = decide
    }

    /// Nothing named to read: the sync may change nothing, and be a read.
    public var mayBeQuiet: Bool { reportedGrantIds.isEmpty && ackedCommandIds.isEmpty }
}

/// What the store read for a sync, in one transaction; for a quiet sync, what sign-in read.
public struct SyncSnapshot: Sendable {
    public var device: DeviceRecord
    /// The application's grants with the reported ids, by id (an unknown id is absent).
    public var reportedGrants: [String: DownloadGrantRecord]
    /// The application's commands with the acknowledged ids, by id.
    public var ackedCommands: [String: CommandRecord]
    /// The device's pending and delivered commands, in delivery order.
    public var openCommands: [CommandRecord]

    public init(device: DeviceRecord, reportedGrants: [String: DownloadGrantRecord] = [:], ackedCommands: [String: CommandRecord] = [:], openCommands: [CommandRecord]) {
        self.device = device
        self.reportedGrants = reportedGrants
        self.ackedCommands = ackedCommands
        self.openCommands = openCommands
    }
}

/// The rules' answer: what to write, in this order, and what the sync answers.
public struct SyncDecision: Sendable {
    /// Grants to store in place of the ones read (the reports' transitions).
    public var grants: [DownloadGrantRecord] = []
    /// Commands to store in place of the ones read (acks, deliveries, expiries), each once.
    public var commands: [CommandRecord] = []
    /// The device's grants to end as `released` (a wipe, a deletion, a detach), at `releasedAt`.
    public var releases: [GrantRelease] = []
    /// The device row to store, when the sync changed it (detached, new versions reported).
    public var device: DeviceRecord?
    public var releasedAt: Date

    /// The answer: one result per report and per ack, in order, the device as it is after the
    /// sync, and its commands still open, in delivery order.
    public var reportResults: [DownloadReportResult] = []
    public var ackResults: [CommandAckResult] = []
    public var deviceAfter: DeviceRecord
    public var openCommands: [CommandRecord] = []

    public init(deviceAfter: DeviceRecord, releasedAt: Date) {
        self.deviceAfter = deviceAfter
        self.releasedAt = releasedAt
    }

    /// Nothing to write.
    public var changesNothing: Bool { grants.isEmpty && commands.isEmpty && releases.isEmpty && device == nil }
}

/// Which of a device's download grants end as `released`.
public enum GrantRelease: Sendable, Equatable {
    case all
    case assets([String])

    /// The asset ids to release; nil for all of them.
    public var assetIds: [String]? {
        switch self {
        case .all: nil
        case .assets(let ids): ids
        }
    }
}
