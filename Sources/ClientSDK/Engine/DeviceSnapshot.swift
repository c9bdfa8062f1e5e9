import Foundation
import Synchronization
import BackplaneWire

/// What the backplane last said about this device and its application (device record,
/// settings, server time), kept in the SDK database so that status shows it offline. Recording
/// a newer answer emits what changed: download enabled, settings.
final class DeviceSnapshot: Sendable {
    private let database: SDKDatabase
    private let clock: ServerClock
    private let broadcaster: EventBroadcaster
    private let stored: Mutex<StoredSync?>
    /// Signalled when the device's download flag or the settings change (the download rules).
    private let onChange: WakeSignal?

    /// Loads the stored snapshot and sets the clock to the offset learnt with it.
    init(database: SDKDatabase, clock: ServerClock, broadcaster: EventBroadcaster, onChange: WakeSignal? = nil) throws {
        let stored = try database.load(StoredSync.self, .lastSync)
        if let offset = stored?.clockOffset { clock.update(offset: offset) }
        self.database = database
        self.clock = clock
        self.broadcaster = broadcaster
        self.stored = Mutex(stored)
        self.onChange = onChange
    }

    var current: StoredSync? {
        stored.withLock { $0 }
    }

    /// Stores an answer of the backplane; `syncedAt` is nil for answers other than a sync's.
    func record(device: Device, settings: ApplicationSettings, serverTime: Date, syncedAt: Date?) throws {
        try stored.withLock { stored in
            let previous = stored
            let next = StoredSync(
                device: device, settings: settings, serverTime: serverTime,
                syncedAt: syncedAt ?? previous?.syncedAt ?? Date(), clockOffset: clock.offset)
            do {
                try database.save(next, .lastSync)
            } catch {
                throw BackplaneClientError(kind: .localStorage, message: "Could not store the sync state.", underlying: error)
            }
            stored = next
            if previous?.device.downloadEnabled != device.downloadEnabled || previous?.settings != settings { onChange?.signal() }
            guard let previous else { return }
            if previous.device.downloadEnabled != device.downloadEnabled {
                broadcaster.emit(.downloadEnabledChanged(device.downloadEnabled))
            }
            if previous.settings != settings {
                broadcaster.emit(.settingsChanged(settings))
            }
        }
    }
}
