import Foundation
import HTTPTypes

// libFuzzer target: the signing-header reader (Sources/Backplane/HTTP/SigningHeaders.swift) on
// header fields made of any bytes, then the checks the signature middleware makes of what it
// read before any HMAC: the timestamp as Unix seconds and its distance from now, the nonce's
// alphabet, and the string to sign (Sources/Shared/RequestSigning.swift).

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSigningHeaders(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self)
    var fields = HTTPFields()
    for line in text.split(separator: "\n") {
        guard let colon = line.firstIndex(of: ":"), let name = HTTPField.Name(String(line[..<colon])) else { continue }
        fields.append(HTTPField(name: name, value: String(line[line.index(after: colon)...].drop { $0 == " " })))
    }
    let headers = SigningHeaders(fields)
    guard let timestampText = headers.timestamp, let nonce = headers.nonce else { return 0 }
    if let timestamp = Int64(timestampText) {
        _ = abs(Date().timeIntervalSince1970 - Double(timestamp))
        _ = Date(timeIntervalSince1970: Double(timestamp))
        if RequestSigning.isValidNonce(nonce) {
            _ = RequestSigning.stringToSign(
                method: "POST", pathAndQuery: "/v1/sync", timestamp: timestamp, nonce: nonce, bodySHA256Hex: "", deviceId: headers.deviceId)
        }
    }
    return 0
}
