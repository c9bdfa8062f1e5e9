import Backplane
import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import BackplaneWire
import Testing

@Suite struct EventTests {
    static func event(
        _ sequence: Int64, _ content: EventContent = .appLaunch, user: String = "alice", at time: Date = Date()
    ) -> DeviceEvent {
        DeviceEvent(
            eventId: "e-\(sequence)-\(content.type.rawValue)", sequence: sequence, deviceTime: time, appState: .foreground,
            platform: "linux", sdkVersion: "0.1.0", appVersion: "1.0", userId: user, content: content)
    }

    private func upload(_ client: Client, _ me: DeviceIdentity, _ batch: some Encodable) async throws -> TestResponse {
        try await client.device(.post, "/v1/events", json: batch, as: me)
    }

    private func accepted(_ client: Client, _ me: DeviceIdentity, _ events: [DeviceEvent], sentAt: Date = Date()) async throws -> EventBatchResponse {
        let response = try await upload(client, me, EventBatch(sentAt: sentAt, events: events))
        #expect(response.status == .ok, "\(response.text)")
        return try response.decode(EventBatchResponse.self)
    }

    private func reportingToken(_ fixture: Fixture, applicationId: String? = nil) async throws -> String {
        try await fixture.services.applications.createToken(applicationId: applicationId ?? fixture.applicationId, scope: .reporting, name: "reports")
    }

    private func page(_ client: Client, _ token: String, _ query: String = "") async throws -> EventPage {
        let response = try await client.admin(.get, "/v1/reports/events\(query)", token: token)
        #expect(response.status == .ok, "\(response.text)")
        return try response.decode(EventPage.self)
    }

    @Test func theSameBatchSentThreeTimesIsStoredOnce() async throws {
        let fixture = try await Fixture.make()
        let token = try await reportingToken(fixture)
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice")
            let events = (1...50).map { Self.event(Int64($0), .downloadStart(assetId: "asset-\($0)")) }
            let first = try await accepted(client, me, events)
            #expect(first.accepted == 50 && first.duplicates == 0 && first.rejected == 0)
            #expect(first.results.map(\.sequence) == events.map(\.sequence))
            for _ in 0..<2 {
                let again = try await accepted(client, me, events)
                #expect(again.accepted == 0 && again.duplicates == 50)
                #expect(again.results.allSatisfy { $0.status == .duplicate })
            }
            let stored = try await page(client, token, "?limit=500")
            #expect(stored.events.count == 50)
            #expect(Set(stored.events.map(\.event.sequence)).count == 50)
            #expect(stored.events.allSatisfy { $0.deviceId == me.deviceId })
            #expect(stored.nextCursor == nil)
        }
    }

    @Test func aReplayedUploadIsRefusedByItsNonceAndStoresNothingMore() async throws {
        let fixture = try await Fixture.make()
        let token = try await reportingToken(fixture)
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice")
            // The upload records its nonce in the events' own transaction: check it still counts.
            let body = try Client.encode(EventBatch(sentAt: Date(), events: [Self.event(1, .playStart(assetId: "a"))]))
            let headers = fixture.signer.headers(method: .post, path: "/v1/events", body: body, deviceId: me.deviceId, credential: me.credential)
            let first = try await client.raw(.post, "/v1/events", headers: headers, body: body)
            #expect(first.status == .ok)
            let replay = try await client.raw(.post, "/v1/events", headers: headers, body: body)
            #expect(replay.status == .unauthorized)
            #expect(replay.errorCode == .nonceReused)
            // A batch with no valid event spends its nonce too.
            let empty = try Client.encode(EventBatch(sentAt: Date(), events: []))
            let emptyHeaders = fixture.signer.headers(method: .post, path: "/v1/events", body: empty, deviceId: me.deviceId, credential: me.credential)
            #expect(try await client.raw(.post, "/v1/events", headers: emptyHeaders, body: empty).status == .ok)
            #expect(try await client.raw(.post, "/v1/events", headers: emptyHeaders, body: empty).errorCode == .nonceReused)
            #expect(try await page(client, token).events.count == 1)
        }
    }

    @Test func aReusedSequenceWithAnotherEventIdIsRejectedNotOverwritten() async throws {
        let fixture = try await Fixture.make()
        let token = try await reportingToken(fixture)
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice")
            _ = try await accepted(client, me, [Self.event(7, .playStart(assetId: "a"))])
            var other = Self.event(7, .playStop(assetId: "a"))
            other.eventId = "a-different-event"
            let answer = try await accepted(client, me, [other])
            #expect(answer.results.first?.status == .rejected)
            #expect(answer.results.first?.code == .conflict)
            #expect(try await page(client, token).events.map(\.event.content.type) == [.playStart])
        }
    }

    @Test func oneBadEventIsRefusedAloneAndNamesItsProblem() async throws {
        let fixture = try await Fixture.make()
        let token = try await reportingToken(fixture)
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice")
            let now = Date()
            let good = try JSONValue.from(Self.event(1, .downloadComplete(assetId: "a", bitrate: 2_000_000, durationSeconds: 12.5), at: now))
            var missingUser = try JSONValue.from(Self.event(2, at: now))
            missingUser.remove("userId")
            var unknownType = try JSONValue.from(Self.event(3, at: now))
            unknownType.set("type", .string("teleport"))
            let tooLong = try JSONValue.from(Self.event(4, .custom(name: "note", string: String(repeating: "x", count: WireLimits.maxEventMessageBytes + 1)), at: now))
            let noAsset = try JSONValue.from(Self.event(5, EventContent(type: .downloadStart), at: now))
            let notAnObject = JSONValue.string("hello")
            // U+0000, which PostgreSQL cannot store: refused here by every store alike.
            let nul = try JSONValue.from(Self.event(6, .custom(name: "note", string: "a\u{0}b"), at: now))
            let batch = JSONValue.object([
                "sentAt": .string(now.formatted(.iso8601)),
                "events": .array([good, missingUser, unknownType, tooLong, noAsset, notAnObject, nul]),
            ])
            let response = try await upload(client, me, batch)
            #expect(response.status == .ok, "\(response.text)")
            let answer = try response.decode(EventBatchResponse.self)
            #expect(answer.results.map(\.status) == [.accepted, .rejected, .rejected, .rejected, .rejected, .rejected, .rejected])
            #expect(answer.results.map(\.index) == Array(0...6))
            #expect(answer.results[6].message?.contains("U+0000") == true)
            #expect(answer.results[1].message?.contains("userId") == true)
            #expect(answer.results[1].sequence == 2)
            #expect(answer.results[2].message?.contains("'teleport' is not one of the known values: appLaunch,") == true, "\(answer.results[2])")
            #expect(answer.results[3].field == "customString")
            #expect(answer.results[3].code == .validationFailed)
            #expect(answer.results[4].field == "assetId")
            #expect(answer.accepted == 1 && answer.rejected == 6)
            let stored = try await page(client, token).events
            #expect(stored.map(\.event.sequence) == [1])
            #expect(stored.first?.event.content.bitrate == 2_000_000)
            #expect(stored.first?.event.content.durationSeconds == 12.5)
        }
    }

    @Test func aBatchThatIsUnusableAsAWholeIsRefusedAndStoresNothing() async throws {
        let fixture = try await Fixture.make()
        let token = try await reportingToken(fixture)
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice")
            let tooMany = (1...(WireLimits.maxEventsPerBatch + 1)).map { Self.event(Int64($0)) }
            let many = try await upload(client, me, EventBatch(sentAt: Date(), events: tooMany))
            #expect(many.status == .badRequest)
            #expect(many.errorCode == .validationFailed)
            #expect(many.errorDetails?["maxEvents"] == .int(Int64(WireLimits.maxEventsPerBatch)))

            // Within the event count, over the body size.
            let huge = (1...WireLimits.maxEventsPerBatch).map { Self.event(Int64($0), .custom(name: "n", string: String(repeating: "y", count: 2000))) }
            let large = try await upload(client, me, EventBatch(sentAt: Date(), events: huge))
            #expect(large.status == .contentTooLarge)
            #expect(large.errorCode == .payloadTooLarge)

            let noSentAt = try await upload(client, me, JSONValue.object(["events": .array([])]))
            #expect(noSentAt.status == .badRequest)
            #expect(noSentAt.text.contains("sentAt"))

            let notJSON = try await client.raw(.post, "/v1/events", headers: fixture.signer.headers(
                method: .post, path: "/v1/events", body: Data("not json".utf8), deviceId: me.deviceId, credential: me.credential),
                body: Data("not json".utf8))
            #expect(notJSON.status == .badRequest)
            #expect(notJSON.errorCode == .badRequest)

            let unsigned = try await client.raw(.post, "/v1/events", body: try Client.encode(EventBatch(sentAt: Date(), events: [Self.event(1)])))
            #expect(unsigned.status == .unauthorized)

            #expect(try await page(client, token).events.isEmpty)
        }
    }

    @Test func aDeviceClockAnHourOffIsCorrected() async throws {
        let fixture = try await Fixture.make()
        let token = try await reportingToken(fixture)
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice")
            let now = Date()
            let deviceNow = now.addingTimeInterval(-3600)  // the device's clock is an hour behind
            let happened = deviceNow.addingTimeInterval(-120)  // two minutes before sending, by the device clock
            let answer = try await accepted(client, me, [Self.event(1, .playStart(assetId: "a"), at: happened)], sentAt: deviceNow)
            #expect(abs(answer.clockSkewSeconds - 3600) < 5)
            let stored = try #require(try await page(client, token).events.first)
            #expect(abs(stored.event.deviceTime.timeIntervalSince(happened)) < 1)
            #expect(abs(stored.correctedTime.timeIntervalSince(now.addingTimeInterval(-120))) < 15)
            #expect(abs(stored.receivedAt.timeIntervalSince(now)) < 15)

            // A clock an hour ahead: corrected back, and never later than receipt.
            let ahead = now.addingTimeInterval(3600)
            _ = try await accepted(client, me, [Self.event(2, .playStop(assetId: "a"), at: ahead.addingTimeInterval(-30))], sentAt: ahead)
            let second = try #require(try await page(client, token, "?type=playStop").events.first)
            #expect(abs(second.correctedTime.timeIntervalSince(now.addingTimeInterval(-30))) < 15)
            #expect(second.correctedTime <= second.receivedAt)
        }
    }

    @Test func applicationsAreIsolated() async throws {
        let fixture = try await Fixture.make()
        let (other, otherKey) = try await fixture.services.applications.createApplication(name: "other app")
        let mine = try await reportingToken(fixture)
        let theirs = try await reportingToken(fixture, applicationId: other.id)
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice", device: "same-device-id")
            _ = try await accepted(client, me, [Self.event(1, .downloadStart(assetId: "mine"))])

            let otherSigner = Signer(keyId: otherKey.keyId, secret: otherKey.secret)
            let registered = try await client.device(.post, "/v1/devices/register", json: RegisterDeviceRequest(
                userId: "bob", deviceId: "same-device-id", platform: "linux"), signer: otherSigner)
            let body = try registered.decode(RegisterDeviceResponse.self)
            let them = DeviceIdentity(deviceId: body.device.deviceId, credential: body.deviceCredential)
            let batch = EventBatch(sentAt: Date(), events: [Self.event(1, .downloadStart(assetId: "theirs"), user: "bob")])
            let response = try await client.device(.post, "/v1/events", json: batch, as: them, signer: otherSigner)
            // Same device id and sequence, another application: a new event, not a duplicate.
            #expect(try response.decode(EventBatchResponse.self).accepted == 1)

            #expect(try await page(client, mine).events.map(\.event.content.assetId) == ["mine"])
            #expect(try await page(client, theirs).events.map(\.event.content.assetId) == ["theirs"])
            // Admin and CMS tokens do not open the reporting API.
            #expect(try await client.admin(.get, "/v1/reports/events").status == .forbidden)
            #expect(try await client.raw(.get, "/v1/reports/events").status == .unauthorized)
            #expect(try await client.admin(.get, "/v1/reports/events/export", token: "bpt_not-a-token").status == .unauthorized)
        }
    }

    @Test func reportsFilterPaginateCountAndExport() async throws {
        let fixture = try await Fixture.make()
        let token = try await reportingToken(fixture)
        try await fixture.test { client in
            let (phone, _) = try await client.register(user: "alice")
            let (tablet, _) = try await client.register(user: "bob")
            let now = Date()
            let day = 86400.0
            // Noon (UTC) two days back, so the events near it fall on one day whatever time the test runs.
            let twoDaysAgo = Date(timeIntervalSince1970: (now.timeIntervalSince1970 / day).rounded(.down) * day - 1.5 * day)
            _ = try await accepted(client, phone, [
                Self.event(1, .downloadStart(assetId: "a1"), at: twoDaysAgo),
                Self.event(2, .downloadComplete(assetId: "a1"), at: twoDaysAgo.addingTimeInterval(60)),
                Self.event(3, .playStart(assetId: "a1"), at: now.addingTimeInterval(-day)),
                Self.event(4, .custom(name: "note", string: "comma, \"quote\"\nand a new line", number: 4.5), at: now.addingTimeInterval(-10)),
            ])
            _ = try await accepted(client, tablet, [
                Self.event(1, .downloadStart(assetId: "b1"), user: "bob", at: twoDaysAgo.addingTimeInterval(30)),
                Self.event(2, .downloadStart(assetId: "a1"), user: "bob", at: now.addingTimeInterval(-5)),
            ])

            // Oldest corrected time first; every filter narrows.
            let all = try await page(client, token)
            #expect(all.events.map(\.event.content.type) == [.downloadStart, .downloadStart, .downloadComplete, .playStart, .custom, .downloadStart])
            #expect(try await page(client, token, "?type=downloadStart").events.count == 3)
            #expect(try await page(client, token, "?userId=bob").events.map(\.event.sequence) == [1, 2])
            #expect(try await page(client, token, "?deviceId=\(phone.deviceId)").events.count == 4)
            #expect(try await page(client, token, "?assetId=a1&type=downloadStart").events.map(\.deviceId) == [phone.deviceId, tablet.deviceId])
            let since = now.addingTimeInterval(-day - 60).formatted(.iso8601)
            let until = now.addingTimeInterval(-60).formatted(.iso8601)
            #expect(try await page(client, token, "?from=\(since)&to=\(until)").events.map(\.event.content.type) == [.playStart])

            // Pages of two, following the cursor, give every event once, in order.
            var seen: [String] = []
            var cursor: String?
            repeat {
                let next = try await page(client, token, "?limit=2" + (cursor.map { "&cursor=\($0)" } ?? ""))
                #expect(next.events.count <= 2)
                seen += next.events.map(\.event.eventId)
                cursor = next.nextCursor
            } while cursor != nil
            #expect(seen == all.events.map(\.event.eventId))

            let counts = try await client.admin(.get, "/v1/reports/events/counts", token: token).decode(EventCounts.self)
            let dayOf = { (date: Date) in String(date.formatted(.iso8601).prefix(10)) }
            #expect(counts.counts.contains(EventCounts.Row(day: dayOf(twoDaysAgo), type: .downloadStart, count: 2)))
            #expect(counts.counts.map(\.count).reduce(0, +) == 6)
            #expect(counts.counts.map(\.day) == counts.counts.map(\.day).sorted())

            let ndjson = try await client.admin(.get, "/v1/reports/events/export?format=ndjson", token: token)
            #expect(ndjson.status == .ok)
            #expect(ndjson.headers[.contentType] == "application/x-ndjson")
            let lines = ndjson.text.split(separator: "\n")
            #expect(lines.count == 6)
            let decoder = WireJSON.decoder()
            let exported = try lines.map { try decoder.decode(StoredEvent.self, from: Data($0.utf8)) }
            #expect(exported.map(\.event.eventId) == all.events.map(\.event.eventId))

            let csv = try await client.admin(.get, "/v1/reports/events/export?format=csv&userId=alice", token: token)
            #expect(csv.headers[.contentType]?.hasPrefix("text/csv") == true)
            #expect(csv.text.hasPrefix("deviceId,sequence,eventId,type,"))
            #expect(csv.text.contains("\"comma, \"\"quote\"\"\nand a new line\""))
            #expect(csv.text.components(separatedBy: "\r\n").filter { !$0.isEmpty }.count == 5)  // header + alice's 4

            // Refused before anything is streamed.
            let badFormat = try await client.admin(.get, "/v1/reports/events/export?format=xml", token: token)
            #expect(badFormat.status == .badRequest && badFormat.errorCode == .validationFailed)
            #expect(try await client.admin(.get, "/v1/reports/events?type=teleport", token: token).status == .badRequest)
            #expect(try await client.admin(.get, "/v1/reports/events?from=yesterday", token: token).status == .badRequest)
            #expect(try await client.admin(.get, "/v1/reports/events?cursor=bogus", token: token).status == .badRequest)
            #expect(try await client.admin(.get, "/v1/reports/events?limit=0", token: token).status == .badRequest)
            #expect(try await client.admin(.get, "/v1/reports/events?from=\(until)&to=\(since)", token: token).status == .badRequest)
        }
    }

    @Test func retentionDeletesOldEventsInSmallBatchesAndALateRetryIsStillADuplicate() async throws {
        let fixture = try await Fixture.make()
        let token = try await reportingToken(fixture)
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice")
            let now = Date()
            let old = (1...5).map { Self.event(Int64($0), .playStart(assetId: "a"), at: now.addingTimeInterval(-40 * 86400)) }
            let recent = (6...8).map { Self.event(Int64($0), .playStart(assetId: "a"), at: now.addingTimeInterval(-60)) }
            _ = try await accepted(client, me, old + recent)

            let store = fixture.services.store
            #expect(try await store.deleteEvents(correctedBefore: now.addingTimeInterval(-30 * 86400), limit: 2) == 2)
            let retention = EventRetention(
                store: store, maxAge: .seconds(30 * 86400), batchSize: 2, logger: Logger(label: "test"), now: { now })
            #expect(try await retention.runOnce() == 3)
            #expect(try await page(client, token).events.map(\.event.sequence) == [6, 7, 8])

            // The device retries an old batch (its answer was lost): not stored a second time.
            let retry = try await accepted(client, me, old)
            #expect(retry.duplicates == 5)
            #expect(try await page(client, token).events.count == 3)
            #expect(try await retention.runOnce() == 0)
        }
    }
}

extension JSONValue {
    /// A wire value as a JSON tree, to break it on purpose.
    static func from(_ value: some Encodable) throws -> JSONValue {
        try WireJSON.decoder().decode(JSONValue.self, from: try WireJSON.encoder().encode(value))
    }

    mutating func remove(_ key: String) {
        if case .object(var fields) = self {
            fields[key] = nil
            self = .object(fields)
        }
    }

    mutating func set(_ key: String, _ value: JSONValue) {
        if case .object(var fields) = self {
            fields[key] = value
            self = .object(fields)
        }
    }
}
