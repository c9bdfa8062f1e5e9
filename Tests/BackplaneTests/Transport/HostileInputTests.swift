import Backplane
import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing

/// Regression tests for what a hostile-but-careful probe found: numbers and dates from outside
/// that crashed the process or planted rows that did, and the smaller holes next to them. Each
/// request gets a 4xx with the error body, changes nothing, and the server keeps answering.
@Suite struct HostileInputTests {
    /// base64url without padding, as the cursors are.
    static func cursor(_ text: String) -> String {
        Data(text.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func date(_ text: String) -> Date { try! Date(text, strategy: .iso8601) }

    @Test func extremeSigningTimestampsAreStaleNotACrash() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice")
            for timestamp in [Int64.min, Int64.max, Int64.min + 1, -1, 0, 99_999_999_999_999] {
                for (method, path, identity) in [
                    (HTTPRequest.Method.post, "/v1/devices/register", nil), (.post, "/v1/sync", me),
                    (.get, "/v1/devices/\(me.deviceId)/channel", me), (.post, "/v1/events", me),
                ] as [(HTTPRequest.Method, String, DeviceIdentity?)] {
                    // Any key, nonce and signature: the timestamp is checked first.
                    var headers = fixture.signer.headers(
                        method: method, path: path, body: Data(), deviceId: identity?.deviceId, credential: identity?.credential,
                        timestamp: timestamp)
                    headers[HTTPField.Name(RequestSigning.Header.keyId)!] = "ak_unknown"
                    let response = try await client.raw(method, path, headers: headers)
                    #expect(response.status == .unauthorized, "\(timestamp) \(path): \(response.text)")
                    #expect(response.errorCode == .staleTimestamp, "\(timestamp) \(path): \(response.text)")
                }
            }
            #expect(try await client.raw(.get, "/healthz").status == .ok)
        }
    }

    @Test func reportingCursorsOutOfRangeAre400() async throws {
        let fixture = try await Fixture.make()
        let token = try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .reporting, name: "r")
        try await fixture.test { client in
            for text in [
                "ev1:9223372036854775807:1", "ev1:-9223372036854775808:1", "ev1:-1:1", "ev1:32503680000000:1", "ev1:1000:-5",
                "ev1:99999999999999999999:1",
            ] {
                let response = try await client.admin(.get, "/v1/reports/events?cursor=\(Self.cursor(text))", token: token)
                #expect(response.status == .badRequest, "\(text): \(response.text)")
                #expect(response.errorCode == .badRequest, "\(text)")
            }
            // A cursor the server issues still works.
            let fine = try await client.admin(.get, "/v1/reports/events?cursor=\(Self.cursor("ev1:1700000000000:1"))", token: token)
            #expect(fine.status == .ok, "\(fine.text)")
        }
    }

    @Test func episodeCursorsOutOfRangeAre400() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice")
            let key = Self.cursor(#"e1:["9223372036854775807","f","a"]"#)
            let response = try await client.device(.get, "/v1/feeds/episodes?since=2020-01-01T00:00:00Z&cursor=\(key)", as: me)
            #expect(response.status == .badRequest, "\(response.text)")
            #expect(response.errorCode == .badRequest)
        }
    }

    @Test func eventTimesOutsideTheAcceptedRangeAreRefusedAndCountsStillAnswer() async throws {
        let fixture = try await Fixture.make()
        let token = try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .reporting, name: "r")
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice")
            // The probe's batch: sent "in 9999" about an event "in year 1".
            let planted = EventBatch(sentAt: Self.date("9999-12-31T00:00:00Z"), events: [
                EventTests.event(1, at: Self.date("0001-01-01T00:00:00Z")),
            ])
            let refused = try await client.device(.post, "/v1/events", json: planted, as: me)
            #expect(refused.status == .badRequest, "\(refused.text)")
            #expect(refused.errorCode == .validationFailed)
            #expect(refused.errorDetails?["field"] == .string("sentAt"))

            // A sane sentAt: each bad device time is refused alone, the good one is stored.
            let mixed = EventBatch(sentAt: Date(), events: [
                EventTests.event(1, at: Self.date("0001-01-01T00:00:00Z")),
                EventTests.event(2, at: Self.date("3000-01-01T00:00:00Z")),
                EventTests.event(3, at: Date()),
            ])
            let answer = try await client.device(.post, "/v1/events", json: mixed, as: me).decode(EventBatchResponse.self)
            #expect(answer.results.map(\.status) == [.rejected, .rejected, .accepted])
            #expect(answer.results.prefix(2).allSatisfy { $0.field == "deviceTime" && $0.code == .validationFailed })

            // In range on their own, but the device's clock says the event is older than 1970 once corrected.
            let ancient = EventBatch(sentAt: Self.date("2999-12-31T00:00:00Z"), events: [
                EventTests.event(4, at: Self.date("1970-01-02T00:00:00Z")),
            ])
            let corrected = try await client.device(.post, "/v1/events", json: ancient, as: me).decode(EventBatchResponse.self)
            #expect(corrected.results.map(\.status) == [.rejected])
            #expect(corrected.results.first?.field == "deviceTime")

            let counts = try await client.admin(.get, "/v1/reports/events/counts", token: token)
            #expect(counts.status == .ok, "\(counts.text)")
            #expect(try counts.decode(EventCounts.self).counts.map(\.count) == [1])
        }
    }

    @Test func aRowStoredBeforeTheRangeCheckDoesNotBreakTheCountsReport() async throws {
        let fixture = try await Fixture.make()
        let token = try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .reporting, name: "r")
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice")
            // What an older server stored for the probe's batch: a corrected time SQLite's date() cannot place.
            let event = EventTests.event(1, at: Date())
            _ = try await fixture.services.store.insertEvents(
                applicationId: fixture.applicationId, deviceId: me.deviceId,
                [EventRecord(
                    applicationId: fixture.applicationId, deviceId: me.deviceId, event: event, receivedAt: Date(),
                    correctedTime: Date(timeIntervalSince1970: -300_000_000_000))],
                signedRequest: nil)
            let counts = try await client.admin(.get, "/v1/reports/events/counts", token: token)
            #expect(counts.status == .ok, "\(counts.text)")
            #expect(try counts.decode(EventCounts.self).counts.isEmpty)
            #expect(try await client.admin(.get, "/v1/reports/events", token: token).status == .ok)
        }
    }

    @Test func queryAndBodyDatesOutsideTheAcceptedRangeAre400() async throws {
        let fixture = try await Fixture.make()
        let reporting = try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .reporting, name: "r")
        let cms = try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .cms, name: "c")
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice")
            let early = try await client.admin(.get, "/v1/reports/events?from=0001-01-01T00:00:00Z", token: reporting)
            #expect(early.status == .badRequest && early.errorCode == .validationFailed, "\(early.text)")
            let since = try await client.device(.get, "/v1/feeds/episodes?since=1969-12-31T23:59:59Z", as: me)
            #expect(since.status == .badRequest && since.errorCode == .validationFailed, "\(since.text)")

            let command = try await client.admin(.post, "/v1/admin/commands", json: EnqueueCommandRequest(
                type: .wipe, deviceId: me.deviceId, expiresAt: Self.date("9999-01-01T00:00:00Z")))
            #expect(command.status == .badRequest && command.errorDetails?["field"] == .string("expiresAt"), "\(command.text)")
            #expect(try await client.admin(.get, "/v1/admin/devices/\(me.deviceId)/commands").decode(CommandList.self).commands.isEmpty)

            _ = try await client.admin(.put, "/v1/cms/feeds/news", json: FeedInput(title: "News"), token: cms)
            let episode = try await client.admin(.post, "/v1/cms/feeds/news/episodes", json: PublishEpisodesRequest(episodes: [
                EpisodeInput(assetId: "a", expiryDate: Self.date("0001-01-01T00:00:00Z")),
            ]), token: cms)
            #expect(episode.status == .badRequest && episode.errorCode == .validationFailed, "\(episode.text)")
        }
    }

    @Test func anEpisodeHoldsABoundedListOfMimeTypes() async throws {
        let fixture = try await Fixture.make()
        let cms = try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .cms, name: "c")
        try await fixture.test { client in
            _ = try await client.admin(.put, "/v1/cms/feeds/news", json: FeedInput(title: "News"), token: cms)
            let many = (0...WireLimits.maxMimeTypesPerEpisode).map { "video/x-\($0)" }
            let refused = try await client.admin(.post, "/v1/cms/feeds/news/episodes", json: PublishEpisodesRequest(episodes: [
                EpisodeInput(assetId: "a", permittedMimeTypes: many),
            ]), token: cms)
            #expect(refused.status == .badRequest && refused.errorCode == .validationFailed, "\(refused.text)")
            #expect(try await fixture.services.store.episode(applicationId: fixture.applicationId, feedId: "news", assetId: "a") == nil)
            let fine = try await client.admin(.post, "/v1/cms/feeds/news/episodes", json: PublishEpisodesRequest(episodes: [
                EpisodeInput(assetId: "a", permittedMimeTypes: Array(many.prefix(WireLimits.maxMimeTypesPerEpisode))),
            ]), token: cms)
            #expect(fine.status == .ok, "\(fine.text)")
        }
    }

    @Test func duplicatedJSONKeysAreRefused() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            for body in [
                #"{"userId": "alice", "deviceId": "d1", "platform": "linux", "userId": "mallory"}"#,
                #"{"userId": "alice", "deviceId": "d1", "platform": "linux", "user\u0049d": "mallory"}"#,
                #"{"userId": "alice", "deviceId": "d1", "platform": "linux", "pushToken": "a", "nested": {"k": 1, "k": 2}}"#,
            ] {
                let data = Data(body.utf8)
                let headers = fixture.signer.headers(method: .post, path: "/v1/devices/register", body: data)
                let response = try await client.raw(.post, "/v1/devices/register", headers: headers, body: data)
                #expect(response.status == .badRequest, "\(body): \(response.text)")
                #expect(response.errorCode == .badRequest)
            }
            #expect(try await client.admin(.get, "/v1/admin/devices?includeUnregistered=true").decode(DevicePage.self).devices.isEmpty)
            // The same key in sibling objects is fine.
            let siblings = Data(#"{"type": "wipe", "userId": "nobody", "assetIds": null}"#.utf8)
            var headers = HTTPFields()
            headers[.authorization] = "Bearer \(fixture.adminToken)"
            headers[.contentType] = "application/json"
            let ok = try await client.raw(.post, "/v1/admin/commands", headers: headers, body: siblings)
            #expect(ok.status != .badRequest || ok.errorCode != .badRequest, "\(ok.text)")
        }
    }

    @Test func aWrongMethodOnAKnownPathIs405WithAllow() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let sync = try await client.raw(.delete, "/v1/sync")
            #expect(sync.status == .methodNotAllowed, "\(sync.text)")
            #expect(sync.errorCode == .methodNotAllowed)
            #expect(sync.headers[.allow] == "POST")
            let device = try await client.raw(.post, "/v1/admin/devices/some-device")
            #expect(device.status == .methodNotAllowed)
            #expect(device.headers[.allow] == "GET")
            let feed = try await client.raw(.post, "/v1/cms/feeds/news")
            #expect(feed.headers[.allow] == "DELETE, GET, PUT", "\(feed.headers)")
            #expect(try await client.raw(.put, "/healthz").status == .methodNotAllowed)
            // Unknown paths are still 404.
            #expect(try await client.raw(.delete, "/v1/nothing-here").status == .notFound)
            #expect(try await client.raw(.get, "/v1/sync/extra").status == .notFound)
        }
    }

    @Test func csvExportTimesCarryTheirZone() async throws {
        let fixture = try await Fixture.make()
        let token = try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .reporting, name: "r")
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice")
            _ = try await client.device(.post, "/v1/events", json: EventBatch(sentAt: Date(), events: [EventTests.event(1)]), as: me)
            let csv = try await client.admin(.get, "/v1/reports/events/export?format=csv", token: token).text
            let lines = csv.components(separatedBy: "\r\n")
            let header = lines[0].components(separatedBy: ","), row = lines[1].components(separatedBy: ",")
            for column in ["deviceTime", "receivedAt", "correctedTime"] {
                let value = row[header.firstIndex(of: column)!]
                #expect(value.hasSuffix("Z"), "\(column) = \(value)")
                #expect((try? Date(value, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))) != nil, "\(column) = \(value)")
            }
        }
    }

    @Test func theDataDirectoryAndDatabaseFilesAreOwnerOnly() async throws {
        let previous = umask(0o022)
        defer { umask(previous) }
        let fixture = try await Fixture.make()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        func mode(_ name: String) throws -> Int {
            let path = name.isEmpty ? fixture.directory.path : fixture.directory.appendingPathComponent(name).path
            return (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
        }
        #expect(try mode("") == 0o700)
        for file in ["backplane.sqlite", "backplane.sqlite-wal", "backplane.sqlite-shm"] {
            let fileMode = try mode(file)
            #expect(fileMode == 0o600, "\(file): \(String(fileMode, radix: 8))")
        }
        // Opening an existing directory made by an older server tightens it too.
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: fixture.directory.path)
        try FileManager.default.setAttributes(
            [.posixPermissions: 0o644], ofItemAtPath: fixture.directory.appendingPathComponent("backplane.sqlite").path)
        _ = try SQLiteStore(directory: fixture.directory)
        #expect(try mode("") == 0o700)
        #expect(try mode("backplane.sqlite") == 0o600)
    }
}
