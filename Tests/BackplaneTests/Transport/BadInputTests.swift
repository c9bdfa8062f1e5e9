import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing

@Suite struct BadInputTests {
    /// Sends a signed registration with a raw body and checks the answer and that nothing was stored.
    private func expectRejected(
        _ client: Client, body: Data, status: HTTPResponse.Status = .badRequest, code: ErrorCode,
        messageContains: String? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let headers = client.fixture.signer.headers(method: .post, path: "/v1/devices/register", body: body)
        let response = try await client.raw(.post, "/v1/devices/register", headers: headers, body: body)
        #expect(response.status == status, "\(response.text)", sourceLocation: sourceLocation)
        #expect(response.errorCode == code, "\(response.text)", sourceLocation: sourceLocation)
        if let messageContains {
            let message = (try? response.decode(ErrorBody.self))?.error.message ?? ""
            #expect(message.contains(messageContains), "\(message)", sourceLocation: sourceLocation)
        }
        let page = try await client.admin(.get, "/v1/admin/devices?includeUnregistered=true").decode(DevicePage.self)
        #expect(page.devices.isEmpty, "rejected input changed state", sourceLocation: sourceLocation)
    }

    @Test func malformedJSONWrongTypesAndMissingFields() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await expectRejected(client, body: Data("{not json".utf8), code: .badRequest, messageContains: "JSON")
            try await expectRejected(client, body: Data(), code: .badRequest, messageContains: "body is required")
            try await expectRejected(
                client, body: Data(#"{"userId": 7, "deviceId": "d", "platform": "linux"}"#.utf8), code: .badRequest, messageContains: "userId")
            try await expectRejected(
                client, body: Data(#"{"userId": "u", "platform": "linux"}"#.utf8), code: .badRequest, messageContains: "deviceId")
            try await expectRejected(
                client, body: Data(#"{"userId": "u", "deviceId": null, "platform": "linux"}"#.utf8), code: .badRequest, messageContains: "deviceId")
        }
    }

    @Test func overLongEmptyAndControlCharacterStrings() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let long = String(repeating: "x", count: WireLimits.maxIdentifierLength + 1)
            for request in [
                RegisterDeviceRequest(userId: long, deviceId: "d", platform: "linux"),
                RegisterDeviceRequest(userId: "u", deviceId: long, platform: "linux"),
                RegisterDeviceRequest(userId: "u", deviceId: "d", nickname: long, platform: "linux"),
                RegisterDeviceRequest(userId: "   ", deviceId: "d", platform: "linux"),
                RegisterDeviceRequest(userId: "u", deviceId: "d\u{0}", platform: "linux"),
                RegisterDeviceRequest(userId: "u", deviceId: "d", platform: ""),
                RegisterDeviceRequest(userId: "u", deviceId: "d", platform: "linux",
                                      pushToken: String(repeating: "p", count: WireLimits.maxPushTokenLength + 1)),
            ] {
                try await expectRejected(client, body: try Client.encode(request), code: .validationFailed)
            }
            // Exactly at the limit is accepted.
            let atLimit = String(repeating: "x", count: WireLimits.maxIdentifierLength)
            try await client.register(user: atLimit, device: atLimit)
            // U+0000 in a path value (PostgreSQL cannot even look it up): 400, on any route.
            for path in ["/v1/admin/devices/d%00", "/v1/applications/%00/entitlement-keys"] {
                let response = try await client.admin(.get, path)
                #expect(response.status == .badRequest, "\(path): \(response.text)")
                #expect(try response.decode(ErrorBody.self).error.code == .badRequest)
            }
        }
    }

    @Test func bodyOverOneMebibyteIs413() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let padding = String(repeating: "a", count: WireLimits.maxBodyBytes)
            let body = Data(#"{"userId": "u", "deviceId": "d", "platform": "linux", "pad": "\#(padding)"}"#.utf8)
            try await expectRejected(client, body: body, status: .contentTooLarge, code: .payloadTooLarge)

            let big = try await client.admin(.patch, "/v1/admin/settings", json: ["pad": padding])
            #expect(big.status == .contentTooLarge)
            #expect(big.errorCode == .payloadTooLarge)
        }
    }

    @Test func unknownFieldsAreIgnored() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let body = Data(#"{"userId": "u", "deviceId": "d", "platform": "linux", "futureField": [1, 2]}"#.utf8)
            let headers = fixture.signer.headers(method: .post, path: "/v1/devices/register", body: body)
            let response = try await client.raw(.post, "/v1/devices/register", headers: headers, body: body)
            #expect(response.status == .created)
        }
    }

    @Test func profileUpdateValidationChangesNothing() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "u", device: "d")
            _ = try await client.device(.patch, "/v1/devices/d", json: DeviceProfileUpdate(nickname: "kept"), as: me)
            let response = try await client.device(.patch, "/v1/devices/d", json: DeviceProfileUpdate(
                nickname: "new", externalDeviceId: String(repeating: "e", count: 200)), as: me)
            #expect(response.status == .badRequest)
            #expect(response.errorCode == .validationFailed)
            #expect(response.errorDetails?["field"] == .string("externalDeviceId"))
            let device = try await client.device(.get, "/v1/devices/d", as: me).decode(DeviceResponse.self).device
            #expect(device.nickname == "kept")

            let wrongType = try await client.raw(.put, "/v1/devices/d/download-enabled",
                headers: fixture.signer.headers(method: .put, path: "/v1/devices/d/download-enabled", body: Data(#"{"downloadEnabled": "yes"}"#.utf8),
                                                deviceId: me.deviceId, credential: me.credential),
                body: Data(#"{"downloadEnabled": "yes"}"#.utf8))
            #expect(wrongType.status == .badRequest)
            #expect(wrongType.errorCode == .badRequest)
        }
    }

    @Test func unknownRoutesAndOpsEndpoints() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let missing = try await client.raw(.get, "/v1/nothing-here")
            #expect(missing.status == .notFound)
            #expect(missing.errorCode == .notFound)
            #expect(missing.headers[HTTPField.Name("X-Request-Id")!]?.isEmpty == false)

            let health = try await client.raw(.get, "/healthz")
            #expect(try health.decode(HealthStatus.self).status == "ok")
            let ready = try await client.raw(.get, "/readyz")
            #expect(ready.status == .ok)
            #expect(try ready.decode(HealthStatus.self).status == "ready")
        }
    }
}
