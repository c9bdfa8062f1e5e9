import Crypto
import Foundation
import BackplaneWire

/// What a registration request offers as proof that it comes from the install that holds the
/// device id (see `RequestSigning`): a signature by the device key over the request's string to
/// sign, and the device credential when the install still has it.
///
/// The app key cannot prove this: it ships inside every copy of the app, and a device's siblings
/// learn its id from `GET /v1/devices`. Without a proof, anyone with the app could register a
/// known id again and lock the real device out with a new credential.
public struct RegistrationProof: Sendable {
    /// The bytes the device key signed: the request's string to sign.
    public var signedBytes: Data
    /// `X-Backplane-Device-Proof`: base64url of the 64-byte ECDSA P-256 `r‖s` signature.
    public var deviceSignature: String?
    /// `X-Backplane-Device-Credential`, when sent.
    public var credential: String?

    public init(signedBytes: Data, deviceSignature: String?, credential: String?) {
        self.signedBytes = signedBytes
        self.deviceSignature = deviceSignature
        self.credential = credential
    }

    /// Whether the device signature verifies with this public key.
    func isSigned(by key: P256.Signing.PublicKey) -> Bool {
        guard let signature = deviceSignature, signature.count <= RequestSigning.maxDeviceKeyTextLength,
              let raw = Base64URL.decode(signature), let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: raw)
        else { return false }
        return key.isValidSignature(ecdsa, for: signedBytes)
    }

    /// Whether the request may take over `device`'s row: signed by its key when it has one; for
    /// a device registered without a key, its current credential; anything once an admin released it.
    func proves(_ device: DeviceRecord) -> Bool {
        if let recorded = device.publicKey { return Self.publicKey(recorded).map(isSigned(by:)) ?? false }
        if device.credentialHash.isEmpty { return true }
        guard let credential else { return false }
        return Secrets.hash(credential) == device.credentialHash
    }

    /// A device public key as sent: base64url of the 65-byte uncompressed X9.63 point.
    static func publicKey(_ text: String) -> P256.Signing.PublicKey? {
        guard text.count <= RequestSigning.maxDeviceKeyTextLength, let bytes = Base64URL.decode(text) else { return nil }
        return try? P256.Signing.PublicKey(x963Representation: bytes)
    }
}
