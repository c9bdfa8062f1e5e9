import Backplane
import Foundation
import HTTPTypes
import HummingbirdTesting
import BackplaneWire
import Testing

/// The console's sign-in, session cookie, form tokens, headers and scopes.
@Suite struct ConsoleSecurityTests {
    static let pages = [
        "/console", "/console/find?q=alice", "/console/users/alice", "/console/devices/phone", "/console/commands", "/console/feeds",
        "/console/events", "/console/settings", "/console/tokens",
    ]

    @Test func everyPageNeedsASignedInSession() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await client.register(user: "alice", device: "phone")
            for path in Self.pages {
                let response = try await client.raw(.get, path)
                #expect(response.status == .seeOther, "\(path)")
                #expect(response.headers[.location] == "/console/sign-in", "\(path)")
            }
            // A form sent without a session changes nothing.
            let browser = ConsoleBrowser(client)
            let refused = try await browser.post("/console/devices/phone/commands", ["type": "wipe", "confirm": "yes", "csrf": "x"])
            #expect(refused.status == .seeOther)
            #expect(try await client.admin(.get, "/v1/admin/devices/phone/commands").decode(CommandList.self).commands.isEmpty)
            // A cookie holding anything but a live token is no session.
            var forged = HTTPFields()
            forged[.cookie] = "backplane_console=bpt_not-a-token"
            #expect(try await client.raw(.get, "/console/settings", headers: forged).headers[.location] == "/console/sign-in")
        }
    }

    @Test func signInSetsAStrictHttpOnlyCookieAndSignOutClearsIt() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let form = try await client.raw(.get, "/console/sign-in")
            let signInValue = try #require(ConsoleBrowser.cookie("backplane_console_signin", in: form))
            let browser = ConsoleBrowser(client)
            let cookie = "backplane_console_signin=\(signInValue)"

            // The sign-in form's own double-submit check: another site cannot sign a browser in.
            let noValue = try await browser.post("/console/sign-in", ["token": fixture.adminToken], cookie: cookie)
            #expect(noValue.status == .forbidden)
            #expect(ConsoleBrowser.cookie("backplane_console", in: noValue) == nil)

            // Another site's form reaches here without the cookie (SameSite=Strict): refused
            // whatever value it sends.
            for value in ["-", "", signInValue] {
                let noCookie = try await browser.post("/console/sign-in", ["signin": value, "token": fixture.adminToken], cookie: "other=1")
                #expect(noCookie.status == .forbidden, "\(value)")
                #expect(ConsoleBrowser.cookie("backplane_console", in: noCookie) == nil)
            }

            let wrong = try await browser.post("/console/sign-in", ["signin": signInValue, "token": "bpt_wrong"], cookie: cookie)
            #expect(wrong.status == .unauthorized)
            #expect(wrong.text.contains("That token is unknown, revoked or expired."))
            #expect(ConsoleBrowser.cookie("backplane_console", in: wrong) == nil)

            let signedIn = try await browser.post("/console/sign-in", ["signin": signInValue, "token": fixture.adminToken], cookie: cookie)
            #expect(signedIn.status == .seeOther)
            #expect(signedIn.headers[.location] == "/console")
            let setCookie = try #require(ConsoleBrowser.setCookie("backplane_console", in: signedIn))
            #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict") && setCookie.contains("Path=/console"))
            #expect(!setCookie.contains("Secure"), "plain HTTP: a Secure cookie would never come back")

            // Behind a TLS proxy the cookie is Secure.
            var https = HTTPFields()
            https[.init("X-Forwarded-Proto")!] = "https"
            let overTLS = try await browser.post(
                "/console/sign-in", ["signin": signInValue, "token": fixture.adminToken], cookie: cookie, headers: https)
            #expect(ConsoleBrowser.setCookie("backplane_console", in: overTLS)?.contains("; Secure") == true)

            var session = try #require(try await ConsoleBrowser.signIn(client, token: fixture.adminToken))
            let overview = try await session.get("/console")
            #expect(overview.status == .ok)
            let signedOut = try await session.post("/console/sign-out", [:])
            #expect(signedOut.status == .seeOther && signedOut.headers[.location] == "/console/sign-in")
            #expect(ConsoleBrowser.setCookie("backplane_console", in: signedOut)?.contains("Max-Age=0") == true)
        }
    }

    @Test func pagesCarryAStrictPolicyAndNeverTheToken() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await client.register(user: "alice", device: "phone")
            var browser = try #require(try await ConsoleBrowser.signIn(client, token: fixture.adminToken))
            for path in Self.pages {
                let page = try await browser.get(path)
                #expect(page.status == .ok, "\(path): \(page.text)")
                let policy = page.headers[.init("Content-Security-Policy")!] ?? ""
                #expect(policy.contains("default-src 'none'") && policy.contains("frame-ancestors 'none'"), "\(path)")
                #expect(page.headers[.cacheControl] == "no-store", "\(path)")
                #expect(page.headers[.init("X-Content-Type-Options")!] == "nosniff", "\(path)")
                #expect(!page.text.contains(fixture.adminToken), "\(path) shows the session's token")
                #expect(!page.text.contains("<script"), "\(path) carries a script")
                #expect(!page.text.contains("style=\""), "\(path) carries a style attribute the policy would block")
            }
        }
    }

    @Test func formsWithoutTheRightTokenOrFromAnotherSiteAreRefused() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await client.register(user: "alice", device: "phone")
            var browser = try #require(try await ConsoleBrowser.signIn(client, token: fixture.adminToken))
            _ = try await browser.get("/console/devices/phone")
            let wipe = ["type": "wipe", "confirm": "yes"]

            let missing = try await browser.post("/console/devices/phone/commands", wipe.merging(["csrf": ""]) { $1 })
            #expect(missing.status == .forbidden)
            #expect(missing.text.contains("security token"))
            let wrong = try await browser.post("/console/devices/phone/commands", wipe.merging(["csrf": String(repeating: "0", count: 40)]) { $1 })
            #expect(wrong.status == .forbidden)
            // Another session's token does not fit this one.
            let other = try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .admin, name: "other")
            var otherBrowser = try #require(try await ConsoleBrowser.signIn(client, token: other))
            _ = try await otherBrowser.get("/console/devices/phone")
            let foreign = try await browser.post("/console/devices/phone/commands", wipe.merging(["csrf": otherBrowser.formToken ?? ""]) { $1 })
            #expect(foreign.status == .forbidden)

            var crossSite = HTTPFields()
            crossSite[.init("Sec-Fetch-Site")!] = "cross-site"
            #expect(try await browser.post("/console/devices/phone/commands", wipe, headers: crossSite).status == .forbidden)
            var otherOrigin = HTTPFields()
            otherOrigin[.init("Origin")!] = "https://evil.example"
            otherOrigin[.init("Host")!] = "backplane.example"
            #expect(try await browser.post("/console/devices/phone/commands", wipe, headers: otherOrigin).status == .forbidden)
            // What a sandboxed frame or a data: page sends; the console's pages send their origin.
            var opaque = HTTPFields()
            opaque[.init("Origin")!] = "null"
            #expect(try await browser.post("/console/devices/phone/commands", wipe, headers: opaque).status == .forbidden)

            #expect(try await client.admin(.get, "/v1/admin/devices/phone/commands").decode(CommandList.self).commands.isEmpty)
            // The same form with the page's token goes through, also from the same host on the
            // port a proxy left out of `Host`.
            var sameHost = HTTPFields()
            sameHost[.init("Origin")!] = "https://backplane.example:8443"
            sameHost[.init("Host")!] = "backplane.example"
            #expect(try await browser.post("/console/devices/phone/commands", wipe, headers: sameHost).status == .seeOther)
            #expect(try await client.admin(.get, "/v1/admin/devices/phone/commands").decode(CommandList.self).commands.count == 1)
        }
    }

    @Test func aReportingTokenReadsTheEventLogAndCannotAct() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await client.register(user: "alice", device: "phone")
            let token = try await fixture.services.applications.createToken(applicationId: fixture.applicationId, scope: .reporting, name: "reports")
            var browser = try #require(try await ConsoleBrowser.signIn(client, token: token))
            let home = try await browser.get("/console")
            #expect(home.status == .seeOther && home.headers[.location] == "/console/events")
            let events = try await browser.get("/console/events")
            #expect(events.status == .ok)
            #expect(!events.text.contains("href=\"/console/settings\""), "the menu offers a page this token may not open")
            for path in ["/console/devices/phone", "/console/settings", "/console/tokens", "/console/commands", "/console/find?q=alice"] {
                #expect(try await browser.get(path).status == .forbidden, "\(path)")
            }
            let wipe = try await browser.post("/console/devices/phone/commands", ["type": "wipe", "confirm": "yes"])
            #expect(wipe.status == .forbidden)
            #expect(wipe.text.contains("needs a token of scope &#39;admin&#39;"))
            let settings = try await browser.post("/console/settings", ["deviceLimit": "0"])
            #expect(settings.status == .forbidden)
            #expect(try await client.admin(.get, "/v1/admin/devices/phone/commands").decode(CommandList.self).commands.isEmpty)
            #expect(try await fixture.services.applications.settings(applicationId: fixture.applicationId).deviceLimit == 5)
        }
    }

    @Test func aRevokedTokenEndsItsSessionsAtOnce() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let token = try await fixture.services.applications.issueToken(applicationId: fixture.applicationId, scope: .cms, name: "cms")
            var browser = try #require(try await ConsoleBrowser.signIn(client, token: token.token))
            #expect(try await browser.get("/console/feeds").status == .ok)
            _ = try await client.admin(.post, "/v1/admin/tokens/\(token.info.tokenId)/revoke")
            let after = try await browser.get("/console/feeds")
            #expect(after.status == .seeOther && after.headers[.location] == "/console/sign-in")
        }
    }

    @Test func hostileFormsAndQueriesAreRefusedWithA4xxAndChangeNothing() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await client.register(user: "alice", device: "phone")
            var browser = try #require(try await ConsoleBrowser.signIn(client, token: fixture.adminToken))
            _ = try await browser.get("/console/devices/phone")
            let oversize = try await browser.post("/console/devices/phone/commands", ["type": "wipe", "confirm": "yes", "pad": String(repeating: "x", count: 20_000)])
            #expect(oversize.status == .contentTooLarge, "\(oversize.status)")
            var json = HTTPFields()
            json[.cookie] = "backplane_console=\(browser.session ?? "")"
            json[.contentType] = "application/json"
            let wrongType = try await client.raw(.post, "/console/devices/phone/commands", headers: json, body: Data(#"{"type":"wipe"}"#.utf8))
            #expect(wrongType.status == .unsupportedMediaType)
            #expect(try await browser.post("/console/devices/phone/commands", ["confirm": "yes"]).status == .badRequest)
            #expect(try await browser.post("/console/devices/phone/commands", ["type": "selfDestruct", "confirm": "yes"]).status == .badRequest)
            #expect(try await browser.post("/console/devices/ph%00one/commands", ["type": "wipe", "confirm": "yes"]).status == .badRequest)
            #expect(try await browser.post("/console/devices/ghost/commands", ["type": "wipe", "confirm": "yes"]).status == .notFound)
            #expect(try await browser.post("/console/devices/phone/download-enabled", ["enabled": "maybe"]).status == .badRequest)
            #expect(try await browser.post("/console/settings", ["deviceLimit": String(repeating: "9", count: 40)]).status == .badRequest)
            #expect(try await browser.get("/console/commands?cursor=not-ours").status == .badRequest)
            #expect(try await browser.get("/console/commands?state=lost").status == .badRequest)
            #expect(try await browser.get("/console/events?from=2026-13-45").status == .badRequest)
            #expect(try await client.admin(.get, "/v1/admin/devices/phone/commands").decode(CommandList.self).commands.isEmpty)
            #expect(try await fixture.services.applications.settings(applicationId: fixture.applicationId).deviceLimit == 5)
            #expect(try await client.raw(.get, "/healthz").status == .ok)
        }
    }
}
