import BackplaneWire

extension BackplaneStore {
    /// Records a signed request's nonce on its own, or refuses its replay (401 `nonce_reused`):
    /// for the signing middleware, and for the sync when none of its writes took the nonce along.
    func spend(_ nonce: SignedRequestRecord) async throws {
        if try await !recordSignedRequest(nonce) { throw BackplaneError.nonceReused }
    }
}
