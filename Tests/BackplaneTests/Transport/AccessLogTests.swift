import Backplane
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import BackplaneWire
import Synchronization
import Testing
import TestSupport

/// The access log: a line per answered request, refusals included, never a secret.
@Suite struct AccessLogTests {
    @Test func everyAnswerLeavesALineWithStatusDurationAndCallerButNoSecret() async throws {
        let fixture = try await Fixture.make()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        let lines = Lines()
        let logger = Logger(label: "access") { label in JSONLogHandler(label: label, write: lines.append) }
        let app = Application(router: buildRouter(fixture.services, accessLog: logger))
        try await app.test(.router) { raw in
            let client = Client(raw: raw, fixture: fixture)
            let (phone, _) = try await client.register(user: "alice", device: "phone")
            #expect(try await client.device(.post, "/v1/sync", json: SyncRequest(), as: phone).status == .ok)
            #expect(try await client.admin(.get, "/v1/admin/settings").status == .ok)
            #expect(try await client.admin(.get, "/v1/admin/settings", token: "bpt_not-a-token").status == .unauthorized)
            #expect(try await client.raw(.delete, "/healthz").status == .methodNotAllowed)

            let logged = try lines.objects()
            #expect(logged.count == 5)
            #expect(logged.allSatisfy { $0["message"] == "request" && $0["level"] == "info" && $0["request_id"]?.isEmpty == false })
            #expect(logged.allSatisfy { Double($0["duration_ms"] ?? "") != nil })

            let registration = try #require(logged.first { $0["route"] == "/v1/devices/register" })
            #expect(registration["status"] == "201" || registration["status"] == "200")
            #expect(registration["app"] == fixture.applicationId)
            let sync = try #require(logged.first { $0["route"] == "/v1/sync" })
            #expect(sync["method"] == "POST" && sync["status"] == "200")
            #expect(sync["app"] == fixture.applicationId && sync["device"] == "phone")
            let refused = try #require(logged.first { $0["status"] == "401" })
            #expect(refused["route"] == "/v1/admin/settings" && refused["code"] == "invalid_credentials")
            #expect(refused["app"] == nil)
            #expect(logged.contains { $0["status"] == "405" && $0["code"] == "method_not_allowed" })

            let everything = lines.text
            for secret in [fixture.adminToken, phone.credential, fixture.signer.secret, "bpt_not-a-token"] {
                #expect(!everything.contains(secret), "a credential reached the access log")
            }
        }
    }

    @Test func aProxysRequestIdIsKeptAndAHostileOneReplaced() async throws {
        let fixture = try await Fixture.make()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        let lines = Lines()
        let logger = Logger(label: "access") { label in JSONLogHandler(label: label, write: lines.append) }
        let app = Application(router: buildRouter(fixture.services, accessLog: logger))
        try await app.test(.router) { client in
            let kept = try await client.execute(uri: "/healthz", method: .get, headers: [.init("X-Request-Id")!: "nginx-0f3a.9_Z"])
            #expect(kept.headers[.init("X-Request-Id")!] == "nginx-0f3a.9_Z")
            let refused = try await client.execute(uri: "/nope", method: .get, headers: [.init("X-Request-Id")!: "proxy-1"])
            #expect(refused.headers[.init("X-Request-Id")!] == "proxy-1")
            #expect(refused.status == .notFound)
            for hostile in ["a b", "x\"y", String(repeating: "a", count: 65), "ü"] {
                let answer = try await client.execute(uri: "/healthz", method: .get, headers: [.init("X-Request-Id")!: hostile])
                #expect(answer.headers[.init("X-Request-Id")!] != hostile)
            }
        }
        let logged = try lines.objects()
        #expect(logged.first?["request_id"] == "nginx-0f3a.9_Z")
        #expect(logged.dropFirst().first?["request_id"] == "proxy-1")
    }

    @Test func jsonLinesEscapeWhatWouldBreakThem() throws {
        let lines = Lines()
        let logger = Logger(label: "backplane") { label in JSONLogHandler(label: label, write: lines.append) }
        logger.warning("two\nlines \"quoted\"", metadata: ["nickname": "a\u{0}b\r\nc"])
        #expect(lines.text.filter { $0 == "\n" }.count == 1)
        let object = try #require(try lines.objects().first)
        #expect(object["message"] == "two\nlines \"quoted\"")
        #expect(object["nickname"] == "a\u{0}b\r\nc")
        #expect(object["level"] == "warning" && object["label"] == "backplane")
        #expect(object["time"].map { $0.hasSuffix("Z") && $0.contains(".") } == true)
    }

    @Test func textLinesAreStreamLogHandlersWithTheMetadataOfTheLoggerAndTheCall() throws {
        let lines = Lines()
        var logger = Logger(label: "backplane") { label in TextLogHandler(label: label, write: lines.append) }
        logger[metadataKey: "request_id"] = "r-1"
        logger[metadataKey: "app"] = "shop"
        logger.debug("not written at info")
        logger.warning("store slow", metadata: ["app": "films", "ms": "120"], source: "Store")
        logger.error("write failed", error: CocoaError(.fileWriteOutOfSpace), source: "Store")

        let written = lines.text.split(separator: "\n").map(String.init)
        #expect(written.count == 2)
        // `2026-11-24T15:04:05+0000 warning backplane: app=films ms=120 request_id=r-1 [Store] store slow`
        let time = try #require(written.first?.split(separator: " ").first)
        #expect(time.count == 24 && time.dropFirst(19).allSatisfy { "+-0123456789".contains($0) })
        #expect(written.first?.dropFirst(25) == "warning backplane: app=films ms=120 request_id=r-1 [Store] store slow")
        #expect(written.last.map { $0.contains(" error.type=") && $0.contains(" error.message=") && $0.hasSuffix(" [Store] write failed") } == true)
    }
}

/// What a `JSONLogHandler` or `TextLogHandler` wrote.
private final class Lines: Sendable {
    private let data = Mutex(Data())

    var append: @Sendable (Data) -> Void { { line in self.data.withLock { $0.append(line) } } }
    var text: String { data.withLock { String(decoding: $0, as: UTF8.self) } }

    func objects() throws -> [[String: String]] {
        try text.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        }
    }
}
