import Foundation

/// The device that signed a request with its credential; it may act only on itself.
struct AuthenticatedDevice: Sendable, Equatable {
    let applicationId: String
    let deviceId: String
}

/// A device's request as sign-in verified it (`SignedRequestMiddleware`): the app key's
/// signature, the timestamp and the device credential are checked, and the nonce is not spent
/// yet. Whoever serves the request spends it, once: a route's middleware before its handler
/// (`SpendNonceMiddleware`), or a service in its own write (the sync, an event upload), so
/// that the request costs one commit.
struct SignedRequest: Sendable {
    let device: AuthenticatedDevice
    /// The device's row as the credential check read it, moments ago, and its open commands,
    /// read with it in one statement: a sync that changes nothing answers from them.
    let record: DeviceRecord
    let openCommands: [CommandRecord]
    /// The nonce to spend.
    let nonce: SignedRequestRecord
}
