// The code blocks of docs/sdk.md, in the order the guide shows them, so that they compile
// against the SDK as it is. GuideExamplesTests fails when a block of the guide is not found
// here unchanged: change the guide and this file together. Never run.
import Foundation

import ClientSDK

let engine = BackplaneEngine(configuration: BackplaneClientConfiguration(
    backplaneURL: URL(string: "https://backplane.example.com")!,
    appKeyId: "ak_…",
    appKeySecret: "…",
    userId: currentUser.id,                  // a person or a household
    dataDirectory: applicationSupport.appendingPathComponent("backplane"),
    device: DeviceDescription(
        externalDeviceId: myDeviceIdForSupport,  // optional
        appVersion: "3.2.0")))

let events = engine.events()   // subscribe before start() to see every event
try await engine.start()

let verifiedEngine = BackplaneEngine(configuration: BackplaneClientConfiguration(
    backplaneURL: backplaneURL, appKeyId: appKeyId, appKeySecret: appKeySecret,
    userId: currentUser.id, dataDirectory: dataDirectory,
    userToken: { userId in try await myBackend.backplaneToken(for: userId) }))

Task {
    for await event in events {
        switch event {
        case .deviceLimitReached(let limit, _):
            showBanner("You can download on \(limit) devices. Turn off another device to download here.")
        case .downloadEnabledChanged(let enabled):
            downloadsToggle.isEnabled = enabled
        case .invalidCredentials(let error):
            logger.error("Backplane rejected the app key: \(error)")
        default:
            break
        }
    }
}

try await engine.updatePushToken(apnsTokenHex, provider: .apns)   // or an FCM token, .fcm; nil clears it
let fromBackplane = engine.handlePush(userInfo)                  // true: the engine syncs as soon as it can

try await engine.subscriptions.subscribe(feedId: "the-long-game", maxItems: 5, autodeleteOldItems: true)
let feeds = try await engine.subscriptions.list()
let queue = try await engine.subscriptions.items(feedId: "the-long-game")   // SubscriptionItem: queued, deferred, downloaded, reset
try await engine.subscriptions.unsubscribe(feedId: "the-long-game")

let episodeURL = URL(string: "https://cdn.example.com/ep-7.mp4")!
try await engine.downloads.enqueue(DownloadRequest(assetId: "ep-7", url: episodeURL))
try await engine.subscriptions.includeItem(assetId: "ep-7", inTrackingFeed: "the-long-game")

struct MyCatalogue: SubscriptionDataSource {
    func metadata(for episode: Episode) async throws -> EpisodeInput? {
        try await cms.lookUp(episode.episode.assetId)   // your own API
    }
    func willAdd(_ metadata: EpisodeInput, feedId: String) async -> Bool { true }
}
let cataloguedEngine = BackplaneEngine(configuration: BackplaneClientConfiguration(
    backplaneURL: backplaneURL, appKeyId: appKeyId, appKeySecret: appKeySecret,
    userId: currentUser.id, dataDirectory: dataDirectory,
    subscriptions: SubscriptionOptions(dataSource: MyCatalogue())))

let log = engine.eventLogger
try log.log(.queuedForDownload(assetId: "ep-7"))
try log.log(.downloadStart(assetId: "ep-7"))
try log.log(.downloadComplete(assetId: "ep-7", bitrate: 4_500_000, durationSeconds: 93))
try log.log(.playStart(assetId: "ep-7"))
try log.log(.playStop(assetId: "ep-7", durationSeconds: 1312))
try log.log(.downloadError(assetId: "ep-8", code: "http_404", message: "Not found"))
try log.log(.downloadLimitReached(.device, assetId: "ep-9"))
try log.log(.custom(name: "rating", number: 4))
log.appState = .background        // recorded with every later event

log.setLoggingEnabled(false, for: .playStop)
log.setLoggingEnabledForAllEvents(false)      // everything that may be disabled
print(log.isLoggingEnabled(for: .downloadStart))   // true: mandatory

do {
    try await engine.updateDownloadEnabled(true)
} catch let error as BackplaneClientError where error.code == .deviceLimitReached {
    // details carry the count and the limit
    // Let the user pick a device to turn off (from the device in hand), then enable this one.
    let picked = try await showDevicePicker(try await engine.userDevices())
    try await engine.disableDownload(onDevice: picked.deviceId)
    try await engine.updateDownloadEnabled(true)
}

try await engine.setNickname("Living room iPad")   // nil clears
try await engine.setExternalDeviceId("crm-1234")
let list = try await engine.userDevices()          // the user's devices, enabled count, settings
try await engine.unregister()                      // leave the user's devices; stops syncing
let status = await engine.status                   // device id, registration, last sync, last error

switch try await engine.rights.recordPlayStart(assetId: "episode-7") {
case .valid: player.play(downloadedFile)   // valid(until:): when its window ends, if it does
case .notYetAvailable(let from): showBanner("Available from \(from)")
case .offlinePeriodExceeded, .untrustedTime: showBanner("Connect to the internet to keep watching")
case .expired, .licenseExpired, .noRights: showBanner("This download has expired")
}
// when playback stops
try await engine.rights.recordPlayStop(assetId: "episode-7", watchedSeconds: 1_260)

var corporate = BackplaneClientConfiguration(
    backplaneURL: URL(string: "https://backplane.corp.example")!, appKeyId: appKeyId, appKeySecret: appKeySecret,
    userId: currentUser.id, dataDirectory: dataDirectory)
corporate.trustedCertificateAuthorities = Bundle.main.url(forResource: "corp-ca", withExtension: "pem")

let playURL = try await engine.playback.url(for: "episode-7")
player.play(playURL)

#if canImport(AVKit)
import AVKit

func playDownload(_ assetId: String, in controller: AVPlayerViewController) async throws {
    let url = try await engine.playback.url(for: assetId)
    controller.player = AVPlayer(playerItem: AVPlayerItem(asset: AVURLAsset(url: url)))
    controller.player?.play()
}
#endif
