import Foundation
import Synchronization
import BackplaneWire

/// The event log on the device (docs/reporting.md). `log(_:)` writes the event to the SDK's
/// database before it returns, so a crash or a kill of the app right after loses nothing; the
/// engine uploads the queue in batches and deletes each event only once the backplane has
/// answered for it.
///
/// ```swift
/// try engine.eventLogger.log(.playStart(assetId: "episode-7"))
/// engine.eventLogger.setLoggingEnabled(false, for: .playStop)
/// ```
///
/// Every type is enabled by default. The mandatory types (`EventType.mandatory`: queued, download
/// start, complete and error, max-errors reset, reset) cannot be disabled: disabling them is
/// ignored, because the backplane's reports and download rules depend on them.
public final class EventLogger: Sendable {
    private let configuration: BackplaneClientConfiguration
    private let storage: SDKStorage
    private let state: Mutex<State>

    private struct State {
        var disabled: Set<EventType>
        var appState: AppState = .unknown
        var onQueued: (@Sendable () -> Void)?
    }

    init(configuration: BackplaneClientConfiguration, storage: SDKStorage) {
        self.configuration = configuration
        self.storage = storage
        self.state = Mutex(State(disabled: configuration.eventLog.disabledTypes.subtracting(EventType.mandatory)))
        // The first event of a new database says the app was installed.
        storage.onCreate { [weak self] database in _ = try? self?.enqueue(.reset(.install), in: database) }
    }

    /// Queues an event durably. Returns it as it will be uploaded (with its sequence number), or
    /// nil when its type is disabled. Throws `.invalidInput` for an event the backplane would
    /// refuse (nothing is queued) and `.localStorage` when the database cannot be written.
    @discardableResult
    public func log(_ content: EventContent) throws -> DeviceEvent? {
        guard isLoggingEnabled(for: content.type) else { return nil }
        return try enqueue(content, in: try storage.open())
    }

    public func setLoggingEnabled(_ enabled: Bool, for type: EventType) {
        guard !type.isMandatory else { return }
        state.withLock { state in
            if enabled { state.disabled.remove(type) } else { state.disabled.insert(type) }
        }
    }

    /// Enables or disables every type at once (the mandatory ones stay enabled).
    public func setLoggingEnabledForAllEvents(_ enabled: Bool) {
        state.withLock { $0.disabled = enabled ? [] : Set(EventType.allCases).subtracting(EventType.mandatory) }
    }

    public func isLoggingEnabled(for type: EventType) -> Bool {
        type.isMandatory || state.withLock { !$0.disabled.contains(type) }
    }

    /// Recorded with every event from now on; the app sets it as it moves between foreground and background.
    public var appState: AppState {
        get { state.withLock { $0.appState } }
        set { state.withLock { $0.appState = newValue } }
    }

    /// How many events wait for upload.
    public func queuedCount() throws -> Int {
        try wrapStorage { try storage.open().eventQueueState().count }
    }

    // MARK: engine side

    /// Called after every queued event (the engine's uploader watches the count and age).
    func onQueued(_ hook: (@Sendable () -> Void)?) {
        state.withLock { $0.onQueued = hook }
    }

    private func enqueue(_ content: EventContent, in store: SDKDatabase) throws -> DeviceEvent {
        let (appState, hook) = state.withLock { ($0.appState, $0.onQueued) }
        let configuration = configuration
        let draft = DeviceEvent(
            eventId: UUID().uuidString.lowercased(), sequence: 1, deviceTime: Date(), appState: appState,
            platform: configuration.device.platform, sdkVersion: BackplaneSDK.version, appVersion: configuration.device.appVersion,
            userId: configuration.userId, externalDeviceId: configuration.device.externalDeviceId, content: content)
        if let problem = draft.problem {
            throw BackplaneClientError(kind: .invalidInput, message: "Event not logged: \(problem.message)")
        }
        let event = try wrapStorage {
            try store.enqueueEvent { sequence in
                var event = draft
                event.sequence = sequence
                return event
            }
        }
        hook?()
        return event
    }

    private func wrapStorage<Value>(_ body: () throws -> Value) throws -> Value {
        do {
            return try body()
        } catch let error as BackplaneClientError {
            throw error
        } catch {
            throw BackplaneClientError(kind: .localStorage, message: "Could not use the SDK database.", underlying: error)
        }
    }
}
