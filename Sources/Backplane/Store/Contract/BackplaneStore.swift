import Foundation
import BackplaneWire

// The store contract: `BackplaneStore` composes one protocol per aggregate (the files beside this
// one, each with the records and filters it takes and returns), and the errors any store throws.
// Records are what the store keeps, not wire types (services map them to BackplaneWire types),
// and hold no database types: the GRDB conformances live in SQLite/, the row decoding of
// PostgreSQL in Postgres/.

/// Persistence of the backplane: one protocol per aggregate, composed into `BackplaneStore`,
/// which the services use. Implementations own the SQL and the transactions; the rules (the
/// device limit, who may do what) are passed in as closures by the services and evaluated inside
/// one transaction, so every check-and-set is atomic whatever the implementation. The guarantees
/// every implementation keeps (atomic device limit, nonces, command states, a change log numbered
/// in commit order, event idempotency, durability) are the store contract in
/// docs/architecture.md.
public protocol BackplaneStore: ApplicationStore, NonceStore, DeviceStore, CommandStore, SyncStore, FeedStore, EventStore, DownloadGrantStore,
    PushStore, ContentKeyStore, LicenseStore, LicenseServerStore {
    /// True when the database answers a trivial query.
    func isReachable() async -> Bool
    /// Where the store reports its transactions' durations (`/metrics`).
    var transactionTimings: TransactionTimings { get }
    /// How wake-ups reach the other nodes sharing this store; nil for a store of one node.
    var wakeUpRelay: (any WakeUpRelay)? { get }
    /// Runs `body` while no other node sharing this store runs its own (what one node does at
    /// startup, the others find done). A store of one node just runs it.
    func exclusively<T: Sendable>(_ body: () async throws -> T) async throws -> T
}

extension BackplaneStore {
    public var wakeUpRelay: (any WakeUpRelay)? { nil }

    public func exclusively<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        try await body()
    }
}

/// A store refused an operation for a reason the caller should have prevented.
public enum StoreError: Error, CustomStringConvertible {
    case unknownApplication(String)
    case unknownDevice(String)
    /// A value the database cannot store (U+0000 in PostgreSQL text): the request's fault,
    /// answered 400 whichever field the validation before did not cover.
    case unstorableValue(String)

    public var description: String {
        switch self {
        case .unknownApplication(let id): "No application with id \(id)."
        case .unknownDevice(let id): "No device with id \(id)."
        case .unstorableValue(let reason): reason
        }
    }

    /// The request's fault (answered 4xx), not the server's.
    public var isRequestsFault: Bool {
        if case .unstorableValue = self { return true }
        return false
    }
}

/// The database could not be reached, or dropped the connection mid-request: nothing was done,
/// or what was done is rolled back. Answered 503, so clients retry.
public struct StoreUnavailableError: Error, Sendable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { "The database is unavailable: \(reason)" }
}
