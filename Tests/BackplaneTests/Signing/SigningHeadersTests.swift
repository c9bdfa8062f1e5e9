@testable import Backplane
import BackplaneWire
import HTTPTypes
import Testing

/// The signing headers are matched by literal name (`SigningHeaders`): each must be the
/// protocol's header, in any case, and a repeated one must read as `HTTPFields`' subscript reads
/// it, so that the check refuses it exactly as before.
struct SigningHeadersTests {
    @Test func eachSigningHeaderIsFoundUnderItsProtocolNameInAnyCase() throws {
        let names = [
            RequestSigning.Header.keyId, RequestSigning.Header.timestamp, RequestSigning.Header.nonce, RequestSigning.Header.signature,
            RequestSigning.Header.deviceId, RequestSigning.Header.deviceCredential,
        ]
        for spelling in [{ (name: String) in name }, { $0.lowercased() }, { $0.uppercased() }] {
            var fields: HTTPFields = [.contentType: "application/json", .host: "backplane"]
            for name in names { fields.append(HTTPField(name: try #require(HTTPField.Name(spelling(name))), value: "value of \(name)")) }
            let headers = SigningHeaders(fields)
            let found = [headers.keyId, headers.timestamp, headers.nonce, headers.signature, headers.deviceId, headers.deviceCredential]
            #expect(found == names.map { "value of \($0)" })
        }
        #expect(SigningHeaders([.contentType: "application/json"]).keyId == nil)
    }

    @Test func aRepeatedHeaderReadsAsTheFieldsSubscriptReadsIt() throws {
        let nonce = try #require(HTTPField.Name(RequestSigning.Header.nonce))
        var fields = HTTPFields()
        fields.append(HTTPField(name: nonce, value: "first-nonce-0001"))
        fields.append(HTTPField(name: .contentType, value: "application/json"))
        fields.append(HTTPField(name: nonce, value: "second-nonce-002"))
        #expect(SigningHeaders(fields).nonce == fields[nonce])
        #expect(SigningHeaders(fields).nonce == "first-nonce-0001, second-nonce-002")
    }
}
