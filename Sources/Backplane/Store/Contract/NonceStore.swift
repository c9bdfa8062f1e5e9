import Foundation
import BackplaneWire

/// Nonces of signed requests: each (key, nonce) is accepted once.
public protocol NonceStore: Sendable {
    /// Spends a nonce for a key until `expiresAt`. False when it was spent before (a replay). A
    /// store that keeps nonces in memory throws `SignedBeforeRestartError` for a timestamp from
    /// before it started, which it can no longer vouch for (SQLiteStore, `SpentNonces`).
    func recordSignedRequest(_ request: SignedRequestRecord) async throws -> Bool
    /// Forgets nonces that expired before `date`; returns how many.
    func pruneNonces(expiredBefore date: Date) async throws -> Int
    /// Nonces kept (replay protection's memory or table), for `/metrics`.
    func nonceCount() async throws -> Int
}

/// A signed request's nonce, to be recorded once (replay protection).
public struct SignedRequestRecord: Sendable, Equatable {
    public var keyId: String
    public var nonce: String
    /// The request's signed timestamp (whole seconds).
    public var signedAt: Date
    /// When the server checked it: the SQLite store's nonce lease counts from it (`SpentNonces`).
    public var receivedAt: Date

    /// Kept until its timestamp can no longer pass the freshness check, and a minute more.
    public var expiresAt: Date { signedAt.addingTimeInterval(RequestSigning.allowedClockSkew + 60) }

    public init(keyId: String, nonce: String, signedAt: Date, receivedAt: Date) {
        self.keyId = keyId
        self.nonce = nonce
        self.signedAt = signedAt
        self.receivedAt = receivedAt
    }
}

/// The nonce of a request was recorded before: a replay. Nothing of the transaction was kept.
public struct NonceReusedError: Error, Sendable {
    public init() {}
}

/// A signed request's timestamp is from before the lease in force when the server started: it
/// may be a replay of a request the server spent in memory before a crash. Answered
/// `stale_timestamp`, with `notBefore`, so the device signs again.
public struct SignedBeforeRestartError: Error, Sendable {
    /// The first signed timestamp (Unix seconds) this server accepts.
    public var notBefore: Int64
    /// When the request was checked.
    public var serverTime: Date
}
