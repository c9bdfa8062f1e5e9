import Foundation

// libFuzzer target: what the license door and the playback server read of ClearKey (a W3C
// license request, Sources/Shared/Licenses.swift), of a forwarded system's challenge and release
// and of a license server's configuration (Sources/Shared/LicenseServers.swift), and what the
// SDK reads of the door's answer (the license, its key ids and wrapped keys in base64url), on
// any bytes. Any trap, overflow or
// memory error is a crash libFuzzer reports.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzClearKey(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let bytes = Data(bytes: start, count: count)
    let decoder = JSONDecoder()
    if let request = try? decoder.decode(ClearKeyRequest.self, from: bytes) {
        _ = try? request.keyIds()
    }
    // A license request as the door reads it: a ClearKey object or a CDM's challenge in base64.
    if let request = try? decoder.decode(LicenseIssueRequest.self, from: bytes), case .clearKey(let clearKey) = request.request {
        _ = try? clearKey.keyIds()
    }
    _ = try? decoder.decode(LicenseReleaseRequest.self, from: bytes)
    _ = try? decoder.decode(LicenseServerRequest.self, from: bytes)
    _ = try? decoder.decode(ForwardedLicenseMessage.self, from: bytes)
    if let answer = try? decoder.decode(LicenseIssueResponse.self, from: bytes), let license = answer.clearKey {
        _ = Base64URL.decode(license.epk)
        for key in license.keys {
            _ = Base64URL.decode(key.kid)
            _ = Base64URL.decode(key.k)
        }
    }
    if let text = String(data: bytes, encoding: .utf8) {
        _ = HexKey.bytes(text)
        _ = Base64URL.decode(text)
    }
    return 0
}
