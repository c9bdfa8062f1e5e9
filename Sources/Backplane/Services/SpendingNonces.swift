import Foundation
import BackplaneWire

extension BackplaneStore {
    /// Records a signed request's nonce on its own, or refuses its replay (401 `nonce_reused`):
    /// for the signing middleware, and for the sync when none of its writes took the nonce along.
    func spend(_ nonce: SignedRequestRecord) async throws {
        if try await !answeringNonceRefusals({ try await recordSignedRequest(nonce) }) { throw ServiceError.nonceReused }
    }
}

/// Runs a store call that spends a nonce, answering the store's refusals: a replay with 401
/// `nonce_reused`, a timestamp from before the server's restart with 401 `stale_timestamp`
/// (whose `notBefore` tells the device what to sign with instead).
func answeringNonceRefusals<T>(_ call: () async throws -> T) async throws -> T {
    do {
        return try await call()
    } catch is NonceReusedError {
        throw ServiceError.nonceReused
    } catch let refused as SignedBeforeRestartError {
        throw ServiceError(.staleTimestamp,
            "The request was signed before the server restarted; sign it again with a timestamp of at least \(refused.notBefore).",
            details: ["serverTime": .int(Int64(refused.serverTime.timeIntervalSince1970)), "notBefore": .int(refused.notBefore)])
    }
}
