import Backplane
import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing

/// What the console's pages show and what their forms do.
@Suite struct ConsolePageTests {
    static let script = "<script>alert(1)</script>"

    @Test func attackerControlledStringsAreShownAsText() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "mallory\"><b>", device: "phone")
            #expect(try await client.device(.patch, "/v1/devices/phone", json: DeviceProfileUpdate(nickname: Self.script), as: me).status == .ok)
            let event = EventTests.event(1, .custom(name: Self.script, string: "<img src=x onerror=alert(2)>"), user: "mallory\"><b>")
            #expect(try await client.device(.post, "/v1/events", json: EventBatch(sentAt: Date(), events: [event]), as: me).status == .ok)
            var browser = try #require(try await ConsoleBrowser.signIn(client, token: fixture.adminToken))
            let pages = [
                "/console/devices/phone", "/console/users/mallory%22%3E%3Cb%3E", "/console/events",
                "/console/find?q=\(ConsoleBrowser.encoded(Self.script))",
            ]
            for path in pages {
                let page = try await browser.get(path)
                #expect(page.status == .ok, "\(path): \(page.text)")
                #expect(!page.text.contains("<script>alert"), "\(path)")
                #expect(!page.text.contains("<img src=x"), "\(path)")
                #expect(!page.text.contains("\"><b>"), "\(path)")
            }
            let device = try await browser.get("/console/devices/phone")
            #expect(device.text.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
            #expect(device.text.contains("mallory&quot;&gt;&lt;b&gt;"))
            let events = try await browser.get("/console/events")
            #expect(events.text.contains("&lt;img src=x onerror=alert(2)&gt;"))
            // A quote with a combining mark is one Character but still a quote to the browser:
            // escaped all the same, it cannot end the search box's value attribute.
            let combining = "x\"\u{301} autofocus onfocus=alert(3) y=\""
            let reflected = try await browser.get("/console/find?q=\(ConsoleBrowser.encoded(combining))")
            #expect(reflected.text.contains("value=\"x&quot;\u{301} autofocus onfocus=alert(3) y=&quot;\""), "\(reflected.text)")
            // Find by nickname reaches the device.
            #expect(try await browser.get("/console/find?q=\(ConsoleBrowser.encoded(Self.script))").text.contains("href=\"/console/devices/phone\""))
        }
    }

    @Test func findTakesAnyKindOfIdAndAFormsSpaces() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice smith", device: "phone", external: "crm 1042")
            #expect(try await client.device(.patch, "/v1/devices/phone", json: DeviceProfileUpdate(nickname: "Alice's TV"), as: me).status == .ok)
            try await client.register(user: "bob", device: "tablet")
            var browser = try #require(try await ConsoleBrowser.signIn(client, token: fixture.adminToken))
            // A browser writes a GET form's spaces as '+'.
            for query in ["phone", "alice+smith", "crm+1042", "Alice%27s+TV", "Alice's%20TV"] {
                let page = try await browser.get("/console/find?q=\(query)")
                #expect(page.status == .ok, "\(query)")
                #expect(page.text.contains("href=\"/console/devices/phone\""), "\(query)")
                #expect(!page.text.contains("href=\"/console/devices/tablet\""), "\(query)")
            }
            #expect(try await browser.get("/console/find?q=alice+smith").text.contains("href=\"/console/users/alice%20smith\""))
            #expect(try await browser.get("/console/find?q=nobody").text.contains("Nothing matches"))
            #expect(try await browser.get("/console/find?q=a&q=b").status == .badRequest)
            #expect(try await browser.get("/console/find?q=\(String(repeating: "x", count: 200))").status == .badRequest)
        }
    }

    @Test func aCommandAsksFirstThenIsQueuedAndCanBeCancelled() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await client.register(user: "alice", device: "phone")
            var browser = try #require(try await ConsoleBrowser.signIn(client, token: fixture.adminToken))
            _ = try await browser.get("/console/devices/phone")
            let question = try await browser.post("/console/devices/phone/commands", ["type": "wipe"])
            #expect(question.status == .ok)
            #expect(question.text.contains("Wipe on device phone?"))
            #expect(question.text.contains(#"name="confirm" value="yes""#))
            #expect(try await client.admin(.get, "/v1/admin/devices/phone/commands").decode(CommandList.self).commands.isEmpty)

            let done = try await browser.post("/console/devices/phone/commands", ["type": "wipe", "confirm": "yes"])
            #expect(done.status == .seeOther && done.headers[.location] == "/console/devices/phone")
            let queued = try #require(try await client.admin(.get, "/v1/admin/devices/phone/commands").decode(CommandList.self).commands.first)
            #expect(queued.type == .wipe && queued.state == .pending)
            let page = try await browser.get("/console/devices/phone")
            #expect(page.text.contains(queued.commandId))
            #expect(page.text.contains("/console/commands/\(queued.commandId)/cancel"))

            #expect(try await browser.post("/console/commands/\(queued.commandId)/cancel", [:]).status == .seeOther)
            #expect(try await client.admin(.get, "/v1/admin/commands/\(queued.commandId)").decode(Command.self).state == .cancelled)
            // Cancelling twice is the API's 409, shown as a page.
            let again = try await browser.post("/console/commands/\(queued.commandId)/cancel", [:])
            #expect(again.status == .conflict && again.text.contains("only a pending command can be cancelled"))

            let assets = try await browser.post("/console/devices/phone/commands", ["type": "deleteAssets", "assetIds": "a1, a2", "confirm": "yes"])
            #expect(assets.status == .seeOther)
            let deleteAssets = try await client.admin(.get, "/v1/admin/devices/phone/commands").decode(CommandList.self).commands.last
            #expect(deleteAssets?.assetIds == ["a1", "a2"])
        }
    }

    @Test func theDownloadSwitchKeepsTheDeviceLimit() async throws {
        let fixture = try await Fixture.make(deviceLimit: 1)
        try await fixture.test { client in
            try await client.register(user: "alice", device: "phone")
            try await client.register(user: "alice", device: "tablet")
            var browser = try #require(try await ConsoleBrowser.signIn(client, token: fixture.adminToken))
            let user = try await browser.get("/console/users/alice")
            #expect(user.text.contains("1 of 1 download-enabled devices in use."))
            let full = try await browser.post("/console/devices/tablet/download-enabled", ["enabled": "true", "back": "user"])
            #expect(full.status == .conflict || full.status == .forbidden, "\(full.status)")
            #expect(try await browser.post("/console/devices/phone/download-enabled", ["enabled": "false", "back": "user"]).headers[.location]
                == "/console/users/alice")
            #expect(try await browser.post("/console/devices/tablet/download-enabled", ["enabled": "true"]).headers[.location] == "/console/devices/tablet")
            let tablet = try await client.admin(.get, "/v1/admin/devices/tablet").decode(DeviceResponse.self)
            #expect(tablet.device.downloadEnabled)
        }
    }

    @Test func settingsShowEachRefusalNextToItsFieldAndSaveNothing() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            var browser = try #require(try await ConsoleBrowser.signIn(client, token: fixture.adminToken))
            _ = try await browser.get("/console/settings")
            var form = [
                "deviceLimit": "3", "maxDownloadsPerDevice": "-5", "maxDownloadsPerAccount": "-1", "maxCopiesPerAccount": "-1",
                "maxLifetimeDownloadsPerAsset": "-1", "expiryAfterDownloadSeconds": "-1", "expiryAfterPlaySeconds": "-1",
                "offlineViewingPeriodSeconds": "soon",
            ]
            let refused = try await browser.post("/console/settings", form)
            #expect(refused.status == .badRequest)
            #expect(refused.text.contains(#"<span class="error" id="offlineViewingPeriodSeconds-error">“soon” is not a whole number.</span>"#))
            #expect(refused.text.contains(#"value="soon""#), "the form comes back as typed")
            #expect(try await fixture.services.applications.settings(applicationId: fixture.applicationId).deviceLimit == 5)

            form["offlineViewingPeriodSeconds"] = "-1"
            let rangeRefused = try await browser.post("/console/settings", form)
            #expect(rangeRefused.status == .badRequest)
            #expect(rangeRefused.text.contains(#"id="maxDownloadsPerDevice-error""#))

            form["maxDownloadsPerDevice"] = "10"
            let saved = try await browser.post("/console/settings", form)
            #expect(saved.status == .ok && saved.text.contains("Settings saved."))
            let settings = try await fixture.services.applications.settings(applicationId: fixture.applicationId)
            #expect(settings.deviceLimit == 3 && settings.maxDownloadsPerDevice == 10)
        }
    }

    @Test func aNewTokenIsShownOnceAndRevokingAsksFirst() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            var browser = try #require(try await ConsoleBrowser.signIn(client, token: fixture.adminToken))
            _ = try await browser.get("/console/tokens")
            let created = try await browser.post("/console/tokens", ["name": "newsroom", "scope": "cms", "expiresInDays": "30"])
            #expect(created.status == .created)
            let secret = try #require(created.text.range(of: #"<code class="secret">"#).map { created.text[$0.upperBound...].prefix { $0 != "<" } })
            #expect(secret.hasPrefix("bpt_"))
            #expect(!(try await browser.get("/console/tokens").text.contains(String(secret))), "the token is shown once only")
            let record = try await fixture.services.applications.authenticate(bearer: String(secret))
            #expect(record.scope == .cms && record.expiresAt != nil)

            #expect(try await browser.post("/console/tokens", ["name": "root", "scope": "admin"]).status == .badRequest)
            #expect(try await browser.post("/console/tokens", ["name": "x", "scope": "cms", "expiresInDays": "0"]).status == .badRequest)

            let question = try await browser.post("/console/tokens/\(record.id)/revoke", [:])
            #expect(question.status == .ok && question.text.contains("Revoke token \(record.id)?"))
            #expect(try await fixture.services.applications.authenticate(bearer: String(secret)).id == record.id)
            #expect(try await browser.post("/console/tokens/\(record.id)/revoke", ["confirm": "yes"]).status == .seeOther)
            await #expect(throws: ServiceError.self) { try await fixture.services.applications.authenticate(bearer: String(secret)) }

            let key = try await browser.post("/console/keys", [:])
            #expect(key.status == .created && key.text.contains("aks_"))
        }
    }

    @Test func aCMSTokenPublishesAndRetractsEpisodes() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let cms = try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .cms, name: "cms")
            #expect(try await client.admin(.put, "/v1/cms/feeds/news", json: FeedInput(title: "News"), token: cms).status == .created)
            var browser = try #require(try await ConsoleBrowser.signIn(client, token: cms))
            #expect(try await browser.get("/console/feeds").text.contains("href=\"/console/feeds/news\""))
            _ = try await browser.get("/console/feeds/news")
            let published = try await browser.post("/console/feeds/news/episodes", ["assetId": "ep1", "title": Self.script, "downloadURL": ""])
            #expect(published.status == .seeOther)
            let feed = try await browser.get("/console/feeds/news")
            #expect(feed.text.contains("ep1") && feed.text.contains("&lt;script&gt;"))
            // Publishing over a live episode would drop the fields this form does not have.
            let again = try await browser.post("/console/feeds/news/episodes", ["assetId": "ep1", "title": "other"])
            #expect(again.status == .conflict && again.text.contains("already published"))
            #expect(try await browser.post("/console/feeds/news/episodes/ep1/retract", [:]).status == .seeOther)
            #expect(!(try await browser.get("/console/feeds/news").text.contains("<td>ep1</td>")))

            // An admin token reads the feeds but publishing is the CMS's.
            var admin = try #require(try await ConsoleBrowser.signIn(client, token: fixture.adminToken))
            #expect(try await admin.get("/console/feeds/news").status == .ok)
            #expect(try await admin.post("/console/feeds/news/episodes", ["assetId": "ep2"]).status == .forbidden)
        }
    }

    @Test func theCommandListFiltersAndPagesNewestFirst() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await client.register(user: "alice", device: "phone")
            for type in [CommandType.syncNow, .wipe, .syncNow, .syncNow] {
                #expect(try await client.admin(.post, "/v1/admin/commands", json: EnqueueCommandRequest(type: type, deviceId: "phone")).status == .created)
            }
            let all = try await client.admin(.get, "/v1/admin/commands").decode(CommandPage.self)
            #expect(all.commands.map(\.type) == [.syncNow, .syncNow, .wipe, .syncNow], "newest first")
            let first = try await client.admin(.get, "/v1/admin/commands?type=syncNow&limit=2").decode(CommandPage.self)
            #expect(first.commands.count == 2 && first.commands.allSatisfy { $0.type == .syncNow })
            let cursor = try #require(first.nextCursor)
            let second = try await client.admin(.get, "/v1/admin/commands?type=syncNow&limit=2&cursor=\(cursor)").decode(CommandPage.self)
            #expect(second.commands.count == 1 && second.nextCursor == nil)
            #expect(Set((first.commands + second.commands).map(\.commandId)).count == 3)
            _ = try await client.admin(.post, "/v1/admin/commands/\(all.commands[0].commandId)/cancel")
            let cancelled = try await client.admin(.get, "/v1/admin/commands?state=cancelled&type=syncNow").decode(CommandPage.self)
            #expect(cancelled.commands.map(\.commandId) == [all.commands[0].commandId])
            #expect(try await client.admin(.get, "/v1/admin/commands?state=lost").errorCode == .validationFailed)
            #expect(try await client.admin(.get, "/v1/admin/commands?cursor=nope").status == .badRequest)

            var browser = try #require(try await ConsoleBrowser.signIn(client, token: fixture.adminToken))
            let page = try await browser.get("/console/commands?state=pending&type=wipe")
            #expect(page.status == .ok)
            #expect(page.text.contains(all.commands[2].commandId) && !page.text.contains(all.commands[1].commandId))
            #expect(page.text.contains(#"<option value="wipe" selected>"#))
        }
    }

    @Test func theEventsPageFiltersChartsAndExports() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let (me, _) = try await client.register(user: "alice", device: "phone")
            let events = [EventTests.event(1, .playStart(assetId: "a1")), EventTests.event(2, .custom(name: "=cmd|' /C calc'!A0", number: -5))]
            #expect(try await client.device(.post, "/v1/events", json: EventBatch(sentAt: Date(), events: events), as: me).status == .ok)
            var browser = try #require(try await ConsoleBrowser.signIn(client, token: fixture.adminToken))
            let page = try await browser.get("/console/events?type=playStart&userId=&deviceId=&from=&to=")
            #expect(page.status == .ok)
            #expect(page.text.contains("<td>playStart</td>") && !page.text.contains("<td>custom</td>"))
            #expect(page.text.contains(#"<rect class="bar""#))
            #expect(try await browser.get("/console/events?from=yesterday").status == .badRequest)
            // A period in the past: the chart ends with it rather than asking the counts for an empty range.
            let past = try await browser.get("/console/events?to=2020-01-15T00:00:00Z")
            #expect(past.status == .ok && past.text.contains("No events in this period."), "\(past.text)")

            let csv = try await browser.get("/console/events/export?format=csv&type=custom")
            #expect(csv.status == .ok && csv.headers[.contentType]?.hasPrefix("text/csv") == true)
            #expect(csv.text.contains(",'=cmd|' /C calc'!A0,"), "a formula is neutralised: \(csv.text)")
            #expect(csv.text.contains(",-5.0\r\n") || csv.text.contains(",-5\r\n"), "a number stays a number: \(csv.text)")
        }
    }
}
