import Foundation
import Synchronization

/// The engine's lifecycle state where every collaborator can read it without a hop to the
/// engine: each checks it between steps, so work stops soon after the engine leaves `.running`.
/// Only the engine changes it.
final class EngineLifecycle: Sendable {
    private let state = Mutex(BackplaneEngine.State.idle)

    var current: BackplaneEngine.State {
        state.withLock { $0 }
    }

    var isRunning: Bool { current == .running }

    func set(_ next: BackplaneEngine.State) {
        state.withLock { $0 = next }
    }

    func requireRunning() throws {
        let current = current
        guard current == .running else {
            throw BackplaneClientError(kind: .notRunning, message: "The engine is \(current.rawValue); call start() first.")
        }
    }
}

/// What the engine's collaborators hand back to it: failures to turn into events and state, and
/// the changes of state only the engine makes.
protocol EngineControl: AnyObject, Sendable {
    /// Turns a failure into the events the app listens for.
    func report(_ error: BackplaneClientError) async
    /// A sync completed: the last error is over.
    func syncSucceeded() async
    /// The backplane has the acknowledgement of a kill or unregister: the device is out.
    func deviceLeft(after command: CommandType) async
    /// The background sync met an error retrying cannot fix (the app was told by events).
    func stopAfterPermanentFailure() async
}

extension SDKDatabase {
    /// Runs `body` on the SDK database, reporting its failure as a `.localStorage` error.
    func access<Value>(_ body: (SDKDatabase) throws -> Value) throws -> Value {
        do {
            return try body(self)
        } catch {
            throw BackplaneClientError(kind: .localStorage, message: "Could not use the SDK database.", underlying: error)
        }
    }
}
