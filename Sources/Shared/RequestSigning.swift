import Foundation

/// The signing scheme of device requests (HMAC-SHA256 with the app key secret).
///
/// The string to sign is seven lines joined by `\n`:
///
///     BPS1-HMAC-SHA256
///     <METHOD>                     upper case, e.g. POST
///     <path?query>                 exactly as sent in the request line
///     <timestamp>                  Unix seconds, decimal, same as the header
///     <nonce>                      same as the header
///     <sha256(body) as lower hex>  of the exact body bytes (empty body: hash of "")
///     <deviceId>                   the X-Backplane-Device-Id header, or empty
///
/// and the signature is the lower-case hex HMAC-SHA256 of it, keyed by the secret's UTF-8 bytes.
/// The HMAC itself is computed by each side with swift-crypto; this type holds only the rules
/// both sides must agree on, so it needs nothing but Foundation.
///
/// **Device proof.** The app key ships inside every copy of the app, so it proves only "some copy
/// of this app". What proves "this install" is the device key: a P-256 key pair the SDK creates
/// with the device id and keeps in the same identity store. Registration sends its public key
/// (`devicePublicKey`: base64url of the 65-byte uncompressed X9.63 point) and signs the same
/// string to sign with it: ECDSA P-256 with SHA-256, the 64-byte `r‖s` signature in base64url,
/// sent as `X-Backplane-Device-Proof`. A device id that is already registered gets a new
/// credential only with a proof by the key it registered with (or, for a device registered
/// before it had a key, with its current credential).
public enum RequestSigning {
    public static let scheme = "BPS1-HMAC-SHA256"

    public enum Header {
        public static let keyId = "X-Backplane-Key"
        public static let timestamp = "X-Backplane-Timestamp"
        public static let nonce = "X-Backplane-Nonce"
        public static let signature = "X-Backplane-Signature"
        public static let deviceId = "X-Backplane-Device-Id"
        public static let deviceCredential = "X-Backplane-Device-Credential"
        /// Registration only: the device key's signature of the string to sign.
        public static let deviceProof = "X-Backplane-Device-Proof"
    }

    /// A signed timestamp further than this from server time is refused (`stale_timestamp`).
    public static let allowedClockSkew: TimeInterval = 5 * 60
    /// Nonces: 16 to 64 characters of `[A-Za-z0-9_-]`.
    public static let nonceLength = 16...64

    public static func stringToSign(
        method: String, pathAndQuery: String, timestamp: Int64, nonce: String, bodySHA256Hex: String, deviceId: String?
    ) -> String {
        [scheme, method.uppercased(), pathAndQuery, String(timestamp), nonce, bodySHA256Hex, deviceId ?? ""]
            .joined(separator: "\n")
    }

    /// The headers of a signed request: the one place they are written, for the SDK and the
    /// tests alike. The caller holds the keys (this module uses Foundation alone): `mac` is the
    /// lower-hex HMAC-SHA256 of the string to sign with the app secret, `proof` the base64url
    /// signature of it by the device key, for a registration that records or proves one.
    public static func headers(
        keyId: String, method: String, pathAndQuery: String, bodySHA256Hex: String, timestamp: Int64, nonce: String,
        deviceId: String? = nil, credential: String? = nil,
        mac: (_ stringToSign: String) -> String, proof: ((_ stringToSign: String) throws -> String)? = nil
    ) throws -> [(name: String, value: String)] {
        let stringToSign = stringToSign(
            method: method, pathAndQuery: pathAndQuery, timestamp: timestamp, nonce: nonce, bodySHA256Hex: bodySHA256Hex, deviceId: deviceId)
        var headers = [
            (Header.keyId, keyId), (Header.timestamp, String(timestamp)), (Header.nonce, nonce), (Header.signature, mac(stringToSign)),
        ]
        if let deviceId { headers.append((Header.deviceId, deviceId)) }
        if let credential { headers.append((Header.deviceCredential, credential)) }
        if let proof { headers.append((Header.deviceProof, try proof(stringToSign))) }
        return headers.map { (name: $0.0, value: $0.1) }
    }

    /// Lower-case hex, as used for the body hash and the signature. Inlinable, so that a caller
    /// in another module loops over its own kind of bytes rather than a generic sequence's: the
    /// server hashes every signed request's body (a profile showed the generic loop).
    @inlinable
    public static func hex(_ bytes: some Sequence<UInt8>) -> String {
        var out = [UInt8]()
        out.reserveCapacity(max(bytes.underestimatedCount, 32) * 2)
        for byte in bytes {
            out.append(hexDigit(byte >> 4))
            out.append(hexDigit(byte & 0x0f))
        }
        return String(decoding: out, as: UTF8.self)
    }

    @usableFromInline
    static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }

    /// Decodes lower- or upper-case hex; nil for anything else (a sign included, which
    /// `UInt8(_:radix:)` would take). On the UTF-8 bytes: every request's signature goes through it.
    public static func unhex(_ text: String) -> Data? {
        text.utf8.withContiguousStorageIfAvailable({ decodeHex($0) }) ?? decodeHex(Array(text.utf8))
    }

    private static func decodeHex(_ text: some RandomAccessCollection<UInt8>) -> Data? {
        guard text.count % 2 == 0 else { return nil }
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes = [UInt8]()
        bytes.reserveCapacity(text.count / 2)
        var index = text.startIndex
        while index != text.endIndex {
            let next = text.index(after: index)
            guard let high = value(text[index]), let low = value(text[next]) else { return nil }
            bytes.append(high << 4 | low)
            index = text.index(after: next)
        }
        return Data(bytes)
    }

    /// Longest accepted `devicePublicKey` and `X-Backplane-Device-Proof` (both are about 87 characters).
    public static let maxDeviceKeyTextLength = 128

    public static func isValidNonce(_ nonce: String) -> Bool {
        // On the UTF-8 bytes: every allowed character is one byte, so the byte count is the length.
        nonceLength.contains(nonce.utf8.count)
            && nonce.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                     UInt8(ascii: "-"), UInt8(ascii: "_"): true
                default: false
                }
            }
    }
}

/// Documented input limits; the server enforces them and answers 400/413 beyond them. Every
/// limit on text counts **UTF-8 bytes**, on both sides: a CJK character takes 3 of them.
public enum WireLimits {
    /// Largest accepted request body.
    public static let maxBodyBytes = 1 << 20
    /// userId, deviceId, externalDeviceId, nickname.
    public static let maxIdentifierLength = 128
    /// Registered devices one user of an application may have (download-enabled or not);
    /// registering one more is 409 `conflict` until one is unregistered.
    public static let maxRegisteredDevicesPerUser = 1_000
    /// platform, model, and the version strings.
    public static let maxShortTextLength = 64
    /// A push token.
    public static let maxPushTokenLength = 512
    /// An application name.
    public static let maxApplicationNameLength = 100
    /// Largest page of an admin list.
    public static let maxPageSize = 500
    public static let defaultPageSize = 100
    /// Asset ids in one `deleteAssets` command.
    public static let maxAssetIdsPerCommand = 1000
    /// Acknowledgements in one sync.
    public static let maxAcksPerSync = 500
    /// Download reports in one sync.
    public static let maxDownloadReportsPerSync = 500
    /// A device's reason for a failed or deferred command.
    public static let maxReasonLength = 500
    /// Episodes in one publish batch (413 above).
    public static let maxEpisodesPerBatch = 500
    /// Titles of feeds and episodes.
    public static let maxTitleLength = 500
    /// Episode descriptions.
    public static let maxDescriptionLength = 10_000
    /// Download URLs.
    public static let maxURLLength = 2048
    /// Encoded size of a feed's metadata or an episode's custom fields.
    public static let maxCustomFieldsBytes = 16 * 1024
    /// Changes in one page of a delta sync.
    public static let maxChangesPerPage = 500
    /// Events in one upload (a larger batch is refused whole with 400).
    public static let maxEventsPerBatch = 500
    /// An event's `errorMessage` or `customString`, in UTF-8 bytes.
    public static let maxEventMessageBytes = 2048
    /// All text fields of one event together, in UTF-8 bytes: the size limit of one event.
    public static let maxEventTextBytes = 4096
    /// Entries of an episode's `permittedMimeTypes`.
    public static let maxMimeTypesPerEpisode = 32

    /// Every date that comes from outside (device times, `sentAt`, publish and expiry dates,
    /// command expiries, query dates) must lie in `acceptedDates`: from 1970-01-01T00:00:00Z up
    /// to, not including, 3000-01-01T00:00:00Z. Inside it, milliseconds fit any integer column,
    /// SQLite's date functions answer, and no date arithmetic overflows.
    public static let acceptedDates = Date(timeIntervalSince1970: 0)..<Date(timeIntervalSince1970: 32_503_680_000)

    /// The sentence every refusal of a date outside `acceptedDates` uses.
    public static func dateOutOfRangeMessage(field: String) -> String {
        "'\(field)' must be on or after 1970-01-01T00:00:00Z and before 3000-01-01T00:00:00Z."
    }
}


/// base64url without padding (RFC 4648 §5): cursors, device keys and proofs.
public enum Base64URL {
    public static func encode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Nil for anything that is not base64url (padding is tolerated).
    public static func decode(_ text: String) -> Data? {
        guard text.utf8.allSatisfy({ byte in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
                || byte == UInt8(ascii: "=")
        }) else { return nil }
        var base64 = text.replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}
