import Foundation

/// Where the engine's parts say what happened, in the SDK's two vocabularies: the event log
/// (`EventLogger`: stored durably, uploaded, what the backplane reports and counts) and the app's
/// stream (`SDKEvent` through `EventBroadcaster`: in process, never stored). `record(_:tellingApp:)`
/// does both where both are meant, so that no site logs an event and forgets to tell the app, or
/// the other way round; `log` and `tellApp` are for what is meant for one side only.
struct EngineEvents: Sendable {
    let logger: EventLogger
    let broadcaster: EventBroadcaster

    /// Logs `logged` for the backplane and tells the app `told`.
    func record(_ logged: EventContent, tellingApp told: SDKEvent) {
        log(logged)
        tellApp(told)
    }

    /// Logs an event for the backplane only. A log that cannot be written (a full disk) does not
    /// stop the work it reports: the engine goes on, and the event is lost.
    func log(_ content: EventContent) {
        _ = try? logger.log(content)
    }

    /// Tells the app only.
    func tellApp(_ event: SDKEvent) {
        broadcaster.emit(event)
    }
}
