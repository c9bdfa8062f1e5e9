import ArgumentParser
import ClientSDK
import Foundation

/// Drives the ClientSDK from a terminal or a test, the way an app would.
@main
struct Harness: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backplane-harness",
        abstract: "Drive the Backplane ClientSDK from the command line.",
        discussion: """
            Connection options may also come from the environment: BACKPLANE_URL, BACKPLANE_APP_KEY,
            BACKPLANE_APP_SECRET, BACKPLANE_USER. Output is JSON on stdout.
            Exit codes:
              0    ok
              1    other error
              3    device limit reached
              4    invalid credentials, or a refused or missing user token
              5    the backplane could not be reached or timed out (the message says which)
              6    device registered to another user
              7    device unregistered or killed
              8    not found (e.g. an unknown feed)
              9    a download failed (download --wait), or its playlists can never be downloaded
              10   not playable (play)
              11   the backplane denied the download (download --wait)
              12   the download cannot move while the harness waits: switched off, no room, a
                   download limit, or the device not enabled for download (download --wait)
              130  stopped by SIGINT or SIGTERM before it was done
            """,
        subcommands: [
            Register.self, Sync.self, Status.self, Devices.self, EnableDownload.self, Unregister.self, Watch.self, Simulate.self,
            AddFile.self, Assets.self, Download.self, Queue.self, Pause.self, Resume.self, Remove.self, UpdateURL.self, ClearRetries.self,
            SetDownloads.self, Rights.self, Play.self, Subscribe.self, Unsubscribe.self, Feeds.self, CMSPublish.self, Log.self,
        ])
}
