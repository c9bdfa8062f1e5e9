import Foundation
import BackplaneWire

/// The operator's push settings: where the providers are and what is trusted for them. Never a
/// tenant's: an application's credentials cannot point the backplane at another host.
public struct PushOptions: Sendable, Equatable {
    /// APNs, both environments; nil: Apple's hosts (production or sandbox, as each application's
    /// credentials say).
    public var apnsURL: URL?
    /// FCM's HTTP v1 API.
    public var fcmURL: URL
    /// Google's OAuth 2.0 token endpoint. A service account's own `token_uri` is used only when
    /// it is this one; the assertion is always sent here.
    public var googleTokenURL: URL
    /// A PEM file of certificate authorities trusted for the providers besides the system's.
    public var trustedCertificateAuthorities: URL?
    /// At most one push per device in this long (Apple's advice for background pushes); a
    /// command enqueued within it is pushed, if still waiting, when it ends.
    public var spacing: Duration
    /// How long to wait, with several nodes, for the others to say that a device's channel is
    /// open on them before pushing it.
    public var channelAnswerWindow: Duration
    /// Attempts of one push when the provider answers 429 or 5xx, or cannot be reached.
    public var maxAttempts: Int
    /// The first retry's delay, doubled for each next one (with jitter), at most 30 s.
    public var firstRetryDelay: Duration

    public static let appleProductionURL = URL(string: "https://api.push.apple.com")!
    public static let appleSandboxURL = URL(string: "https://api.sandbox.push.apple.com")!
    public static let googleFCMURL = URL(string: "https://fcm.googleapis.com")!
    public static let googleTokenURL = URL(string: "https://oauth2.googleapis.com/token")!

    public init(
        apnsURL: URL? = nil, fcmURL: URL = PushOptions.googleFCMURL, googleTokenURL: URL = PushOptions.googleTokenURL,
        trustedCertificateAuthorities: URL? = nil, spacing: Duration = .seconds(30), channelAnswerWindow: Duration = .milliseconds(300),
        maxAttempts: Int = 4, firstRetryDelay: Duration = .milliseconds(500)
    ) {
        self.apnsURL = apnsURL
        self.fcmURL = fcmURL
        self.googleTokenURL = googleTokenURL
        self.trustedCertificateAuthorities = trustedCertificateAuthorities
        self.spacing = spacing
        self.channelAnswerWindow = channelAnswerWindow
        self.maxAttempts = max(1, maxAttempts)
        self.firstRetryDelay = firstRetryDelay
    }

    func apnsURL(for environment: APNsEnvironment) -> URL {
        apnsURL ?? (environment == .sandbox ? Self.appleSandboxURL : Self.appleProductionURL)
    }
}

