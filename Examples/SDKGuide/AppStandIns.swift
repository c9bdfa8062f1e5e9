import ClientSDK
import Foundation

// What the guide's examples take from the app around them: its user, its directories, its
// views and its own services. Stand-ins so the examples compile; this target is never run.

struct AppUser {
    let id: String
}

let currentUser = AppUser(id: "alice")
let applicationSupport = FileManager.default.temporaryDirectory
let myDeviceIdForSupport: String? = "support-1234"
let backplaneURL = URL(string: "https://backplane.example.com")!
let appKeyId = "ak_example"
let appKeySecret = "example-secret"
let dataDirectory = applicationSupport.appendingPathComponent("backplane")
let tokenString = "push-token"

final class Toggle: @unchecked Sendable {
    var isEnabled = false
}

let downloadsToggle = Toggle()

struct AppLogger: Sendable {
    func error(_ message: String) {}
}

let logger = AppLogger()

func showBanner(_ text: String) {}
/// The APNs device token as hex, and a received push's payload (`userInfo`).
let apnsTokenHex = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
nonisolated(unsafe) let userInfo: [AnyHashable: Any] = ["aps": ["content-available": 1], "backplane": "sync"]

/// The app's picker: the device the user chose among the other download-enabled ones.
func showDevicePicker(_ devices: UserDevicesResponse) async throws -> Device {
    devices.devices.first { $0.downloadEnabled }!
}

/// The app's own catalogue service.
struct Catalogue: Sendable {
    func lookUp(_ assetId: String) async throws -> EpisodeInput? {
        EpisodeInput(assetId: assetId, title: "Episode \(assetId)")
    }
}

let cms = Catalogue()

/// The app's player.
struct Player: Sendable {
    func play(_ url: URL) {}
}

let player = Player()
let downloadedFile = URL(fileURLWithPath: "/downloads/episode-7.mp4")

/// The app's own backend, which signs user tokens for its signed-in user.
struct Backend: Sendable {
    func backplaneToken(for userId: String) async throws -> String { "" }
}

let myBackend = Backend()
