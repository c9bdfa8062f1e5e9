import Foundation
import Synchronization

/// The SDK's one database, opened once, the first time the engine (`BackplaneEngine.start`) or
/// its event logger (which may log before the engine starts) needs it; both get it from here.
/// A database this opens new gets the `reset(install)` event first (`onCreate`).
final class SDKStorage: Sendable {
    private let directory: URL
    private struct State {
        var database: SDKDatabase?
        var onCreate: (@Sendable (SDKDatabase) -> Void)?
    }
    private let state = Mutex(State())

    init(directory: URL) {
        self.directory = directory
    }

    /// Called with a database this storage creates, before anyone else uses it.
    func onCreate(_ hook: @escaping @Sendable (SDKDatabase) -> Void) {
        state.withLock { $0.onCreate = hook }
    }

    /// The database, opened (and created) on first use; a failure is a `.localStorage` error.
    func open() throws -> SDKDatabase {
        do {
            return try state.withLock { state in
                if let database = state.database { return database }
                let existed = FileManager.default.fileExists(atPath: SDKDatabase.path(in: directory).path)
                let opened = try SDKDatabase(directory: directory)
                state.database = opened
                if !existed { state.onCreate?(opened) }
                return opened
            }
        } catch {
            throw BackplaneClientError(kind: .localStorage, message: "Could not use the SDK database.", underlying: error)
        }
    }
}
