import Foundation
import HTTPTypes
import Hummingbird
import BackplaneWire

/// The admin console at `/console`: server-rendered pages over the same services as the admin,
/// CMS and reporting APIs, so the console can do nothing the API would refuse. Reading works
/// without JavaScript, and the pages carry none. Pages by area: this file (sign-in, overview,
/// find), `+Devices` (users, devices, commands), `+Application` (settings, tokens and keys),
/// `+Content` (feeds, events). How it is secured: docs/architecture.md, "Admin console".
struct ConsoleController {
    let services: BackplaneServices
    let renderer = ConsoleRenderer()

    /// How many days the overview's event chart covers.
    static let chartDays = 14

    func addRoutes(to router: Router<BackplaneRequestContext>) {
        let errors = ConsoleErrorMiddleware(renderer: renderer)
        let open = router.group("console").add(middleware: errors)
        open.get("static/console.css") { _, _ in ConsoleAssets.response(ConsoleAssets.stylesheet, contentType: "text/css; charset=utf-8") }
        open.get("static/favicon.svg") { _, _ in ConsoleAssets.response(ConsoleAssets.favicon, contentType: "image/svg+xml") }
        open.get("sign-in", use: signInPage)
        open.post("sign-in", use: signIn)

        let signedIn = router.group("console")
            .add(middleware: ConsoleSessionMiddleware(services: services))
            .add(middleware: errors)
            .group(context: ConsoleRequestContext.self)
        signedIn.get(use: overview)
        signedIn.post("sign-out", use: signOut)
        signedIn.get("find", use: find)
        addDeviceRoutes(to: signedIn)
        addLicenseRoutes(to: signedIn)
        addApplicationRoutes(to: signedIn)
        addContentRoutes(to: signedIn)
    }

    // MARK: sign-in

    struct SignInModel {
        let message: String?
        let signInToken: String
    }

    /// The sign-in form, with a fresh value for the double-submit check in a cookie of its own.
    @Sendable func signInPage(_ request: Request, context: BackplaneRequestContext) async throws -> Response {
        signInForm(request, message: nil, status: .ok)
    }

    private func signInForm(_ request: Request, message: String?, status: HTTPResponse.Status) -> Response {
        let value = Secrets.consoleSignInValue()
        var response = renderer.page(
            "sign-in", title: "Sign in", model: SignInModel(message: message, signInToken: value), session: nil, status: status)
        response.setCookie(ConsoleSecurity.cookie(ConsoleSecurity.signInCookie, value, maxAge: 3600, request: request))
        return response
    }

    struct SignInForm: Decodable {
        let token: String
        let signin: String?
    }

    @Sendable func signIn(_ request: Request, context: BackplaneRequestContext) async throws -> Response {
        let form = try await ConsoleForms.decode(SignInForm.self, from: request)
        // Without the form's cookie there is nothing to compare with: a browser that did not load
        // the form here (another site's form posting to this one) is refused.
        guard let expected = request.cookies[ConsoleSecurity.signInCookie]?.value, !expected.isEmpty else {
            throw ConsoleSecurity.refused("Open the sign-in page and sign in from there.")
        }
        try ConsoleSecurity.checkForm(request, formToken: form.signin, expected: expected)
        let token = form.token.trimmingCharacters(in: .whitespacesAndNewlines)
        let record: TokenRecord
        do {
            record = try await services.applications.authenticate(bearer: token, now: services.now())
        } catch let error as ServiceError where error.code == .invalidCredentials {
            return signInForm(request, message: "That token is unknown, revoked or expired.", status: .unauthorized)
        }
        var response = Response(status: .seeOther, headers: [.location: ConsoleNavigation.home(for: record.scope)])
        response.setCookie(ConsoleSecurity.cookie(ConsoleSecurity.sessionCookie, token, maxAge: ConsoleSecurity.sessionLifetimeSeconds, request: request))
        response.setCookie(ConsoleSecurity.cookie(ConsoleSecurity.signInCookie, nil, maxAge: 0, request: request))
        return response
    }

    struct FormTokenOnly: ConsoleForm {
        let csrf: String?
    }

    @Sendable func signOut(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        _ = try await context.form(FormTokenOnly.self, from: request, needs: nil, toDo: "Signing out")
        var response = Response(status: .seeOther, headers: [.location: "/console/sign-in"])
        response.setCookie(ConsoleSecurity.cookie(ConsoleSecurity.sessionCookie, nil, maxAge: 0, request: request))
        return response
    }

    // MARK: overview

    struct Card {
        let label: String
        let value: Int
        let note: String?
        let href: String
    }

    struct OverviewModel {
        let cards: [Card]
        let chart: DailyChart?
    }

    @Sendable func overview(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        guard context.session.scope == .admin else {
            return Response(status: .seeOther, headers: [.location: ConsoleNavigation.home(for: context.session.scope)])
        }
        let applicationId = context.applicationId
        let now = services.now()
        let fleet = try await services.devices.fleetSummary(applicationId: applicationId)
        let commands = try await services.commands.counts(applicationId: applicationId)
        let days = Self.chartDays
        let from = Calendar.utc.startOfDay(for: now).addingTimeInterval(-Double(days - 1) * 86400)
        let counts = try await services.events.counts(applicationId: applicationId, filter: EventFilter(from: from))
        let cards = [
            Card(label: "Registered devices", value: fleet.registeredDevices, note: nil, href: "/console/find"),
            Card(label: "Download-enabled", value: fleet.downloadEnabledDevices, note: nil, href: "/console/find"),
            Card(label: "Channels open", value: services.wakeUpHub.channelCount, note: "on this node", href: "/console"),
            Card(label: "Synced in the last hour", value: fleet.devicesSeenSince, note: "devices", href: "/console/events"),
            Card(label: "Commands pending", value: commands[.pending] ?? 0, note: "not yet delivered", href: "/console/commands?state=pending"),
            Card(label: "Commands delivered", value: commands[.delivered] ?? 0, note: "awaiting the device's answer",
                 href: "/console/commands?state=delivered"),
            Card(label: "Commands failed", value: commands[.failed] ?? 0, note: nil, href: "/console/commands?state=failed"),
        ]
        let chart = DailyChart(counts: counts.counts, from: from, days: days)
        return renderer.page(
            "overview", title: "Overview", model: OverviewModel(cards: cards, chart: chart), session: context.session, current: .overview)
    }

    // MARK: find

    /// Mustache reads stored properties only (through `Mirror`), so what the template tests is stored.
    struct FindModel {
        let query: String
        let searched: Bool
        let userHref: String?
        let devices: [DeviceRow]
        let hasDevices: Bool
        let nothingFound: Bool
        /// Some lookup found more than a page: only its first page is shown.
        let truncated: Bool

        init(query: String, searched: Bool, userHref: String?, devices: [DeviceRow], truncated: Bool = false) {
            self.query = query
            self.searched = searched
            self.userHref = userHref
            self.devices = devices
            self.truncated = truncated
            hasDevices = !devices.isEmpty
            nothingFound = searched && devices.isEmpty && userHref == nil
        }
    }

    /// One box for what a caller might read out: a user id, a device id, an external device id or
    /// a nickname, each matched exactly through its index.
    @Sendable func find(_ request: Request, context: ConsoleRequestContext) async throws -> Response {
        try context.session.require(.admin, toDo: "Finding users and devices")
        let query = (try ConsoleForms.query(request)["q"] ?? "").trimmingCharacters(in: .whitespaces)
        guard !query.isEmpty else {
            return renderer.page(
                "find", title: "Find", model: FindModel(query: "", searched: false, userHref: nil, devices: []), session: context.session,
                current: .find)
        }
        let search = try await services.devices.find(applicationId: context.applicationId, query: query)
        let model = FindModel(
            query: query, searched: true, userHref: search.userHasDevices ? ConsolePaths.user(query) : nil,
            devices: search.devices.map(DeviceRow.init), truncated: search.truncated)
        return renderer.page("find", title: "Find", model: model, session: context.session, current: .find)
    }
}

/// Console errors as pages. Only the backplane's own errors: anything else is left to the API's
/// error middleware, which answers it as it would any request.
struct ConsoleErrorMiddleware: RouterMiddleware {
    typealias Context = BackplaneRequestContext

    let renderer: ConsoleRenderer

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let refusal where refusal is ServiceError || refusal is BackplaneError || (refusal as? StoreError)?.isRequestsFault == true {
            let error = ErrorMiddleware<Context>.map(refusal, requestId: context.id)
            context.access.record(error.code)
            guard case .browser(let session)? = context.identity else { return renderer.error(error, session: nil) }
            return renderer.error(error, session: session)
        }
    }
}

/// Where the console's pages live, one home for each URL built.
enum ConsolePaths {
    static func user(_ userId: String) -> String { "/console/users/\(ConsoleFormat.encoded(userId))" }
    static func device(_ deviceId: String) -> String { "/console/devices/\(ConsoleFormat.encoded(deviceId))" }
    static func feed(_ feedId: String) -> String { "/console/feeds/\(ConsoleFormat.encoded(feedId))" }
    static func asset(_ assetId: String) -> String { "/console/assets/\(ConsoleFormat.encoded(assetId))" }
}

extension Calendar {
    /// Gregorian in UTC: the event counts' days.
    static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()
}
