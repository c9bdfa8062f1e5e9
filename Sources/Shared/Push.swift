import Foundation

/// The services that wake an app that is not running: Apple's (APNs) and Google's (FCM).
public struct PushProvider: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let apns = PushProvider(rawValue: "apns")
    public static let fcm = PushProvider(rawValue: "fcm")
    public static let allCases: [PushProvider] = [.apns, .fcm]

    /// The provider of a device that sent a push token without naming one (SDKs before
    /// `pushProvider` existed): Apple's platforms use APNs, Android FCM; anything else none.
    public static func assumed(forPlatform platform: String) -> PushProvider? {
        switch platform.lowercased() {
        case "ios", "ipados", "tvos", "watchos", "visionos", "macos": .apns
        case "android", "androidtv", "fireos": .fcm
        default: nil
        }
    }
}

/// What every push the backplane sends carries, so that an app can tell it from its own pushes:
/// the key `backplane` with the value `sync` (at the payload's top level on APNs, in the data
/// message on FCM). It says nothing else: the device syncs and reads its commands from the queue.
public enum PushWakeUpPayload {
    public static let key = "backplane"
    public static let value = "sync"
}

/// Which of Apple's two push environments an app's tokens belong to: development builds get
/// sandbox tokens, App Store and TestFlight builds production ones.
public struct APNsEnvironment: WireVocabulary {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let production = APNsEnvironment(rawValue: "production")
    public static let sandbox = APNsEnvironment(rawValue: "sandbox")
    public static let allCases: [APNsEnvironment] = [.production, .sandbox]
}

/// `PUT /v1/admin/push/apns`: the application's APNs provider key (token-based authentication).
public struct APNsCredentialsUpdate: Codable, Sendable, Equatable {
    /// The Apple Developer team id (the JWT's `iss`).
    public var teamId: String
    /// The key id of the .p8 key (the JWT's `kid`).
    public var keyId: String
    /// The .p8 file's text: a PEM P-256 private key. Stored as a secret; never shown back.
    public var privateKey: String
    /// The app's bundle id (`apns-topic`).
    public var topic: String
    public var environment: APNsEnvironment

    public init(teamId: String, keyId: String, privateKey: String, topic: String, environment: APNsEnvironment) {
        self.teamId = teamId
        self.keyId = keyId
        self.privateKey = privateKey
        self.topic = topic
        self.environment = environment
    }
}

/// `PUT /v1/admin/push/fcm`: the Google service account the backplane sends FCM messages as.
public struct FCMCredentialsUpdate: Codable, Sendable, Equatable {
    /// The service-account JSON file Google's console downloads, as it is. Stored as a secret;
    /// only its `project_id` is shown back.
    public var serviceAccount: JSONValue

    public init(serviceAccount: JSONValue) {
        self.serviceAccount = serviceAccount
    }
}

/// A provider refused the application's credentials (APNs 403, an OAuth grant refused): the
/// backplane stops pushing with them until an admin sets new ones.
public struct PushCredentialsBroken: Codable, Sendable, Equatable {
    public var since: Date
    /// The provider's reason (`InvalidProviderToken`, `invalid_grant`, ...).
    public var reason: String

    public init(since: Date, reason: String) {
        self.since = since
        self.reason = reason
    }
}

/// The APNs settings as shown back: never the key.
public struct APNsConfiguration: Codable, Sendable, Equatable {
    public var teamId: String
    public var keyId: String
    public var topic: String
    public var environment: APNsEnvironment
    public var setAt: Date
    public var broken: PushCredentialsBroken?

    public init(teamId: String, keyId: String, topic: String, environment: APNsEnvironment, setAt: Date, broken: PushCredentialsBroken? = nil) {
        self.teamId = teamId
        self.keyId = keyId
        self.topic = topic
        self.environment = environment
        self.setAt = setAt
        self.broken = broken
    }
}

/// The FCM settings as shown back: the project only.
public struct FCMConfiguration: Codable, Sendable, Equatable {
    public var projectId: String
    public var setAt: Date
    public var broken: PushCredentialsBroken?

    public init(projectId: String, setAt: Date, broken: PushCredentialsBroken? = nil) {
        self.projectId = projectId
        self.setAt = setAt
        self.broken = broken
    }
}

/// `GET /v1/admin/push`: which providers the application pushes through.
public struct PushConfigurationResponse: Codable, Sendable, Equatable {
    public var applicationId: String
    public var apns: APNsConfiguration?
    public var fcm: FCMConfiguration?

    public init(applicationId: String, apns: APNsConfiguration? = nil, fcm: FCMConfiguration? = nil) {
        self.applicationId = applicationId
        self.apns = apns
        self.fcm = fcm
    }
}
