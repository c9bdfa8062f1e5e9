import Foundation
import Synchronization

/// How one background loop sleeps: until it is signalled, or a delay passes, or its task is
/// cancelled, whichever comes first. A signal sent while nobody waits is kept for the next wait,
/// so a wake-up that arrives while the loop is busy is not lost.
///
/// Each wait has its own timer, and only that wait's timer can end it: a timer left over from an
/// earlier wait (cancelled, or firing late) never cuts a later wait short.
final class WakeSignal: Sendable {
    enum Outcome: Sendable, Equatable {
        case signalled, timedOut, cancelled
    }

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Outcome, Never>
    }

    private struct State {
        var waiter: Waiter?
        var pending = false
        var nextId: UInt64 = 0
        /// A wait that was cancelled or timed out before it began to wait: it ends at once.
        var endedEarly: (id: UInt64, outcome: Outcome)?
    }

    private let state = Mutex(State())

    /// Wakes the current wait, or the next one if nobody waits now.
    func signal() {
        let waiter = state.withLock { state -> Waiter? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.continuation.resume(returning: .signalled)
    }

    /// Waits for a signal, for at most `delay` (nil: no limit). One waiter at a time.
    func wait(upTo delay: Duration?) async -> Outcome {
        // A cancelled waiter (a loop being stopped) must not use up a signal meant for the next.
        if Task.isCancelled { return .cancelled }
        let id: UInt64? = state.withLock { state in
            if state.pending {
                state.pending = false
                return nil
            }
            state.nextId += 1
            return state.nextId
        }
        guard let id else { return .signalled }
        let timer = delay.map { delay in
            Task { [weak self] in
                // A cancelled sleep throws: only a timer that really slept ends the wait.
                guard (try? await Task.sleep(for: delay)) != nil else { return }
                self?.end(id, .timedOut)
            }
        }
        defer { timer?.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let early = state.withLock { state -> Outcome? in
                    if let ended = state.endedEarly, ended.id == id { return ended.outcome }
                    if state.pending {
                        state.pending = false
                        return .signalled
                    }
                    state.waiter = Waiter(id: id, continuation: continuation)
                    return nil
                }
                if let early { continuation.resume(returning: early) }
            }
        } onCancel: {
            end(id, .cancelled)
        }
    }

    /// Ends wait `id` if it is still the current one.
    private func end(_ id: UInt64, _ outcome: Outcome) {
        let waiter = state.withLock { state -> Waiter? in
            guard let waiter = state.waiter, waiter.id == id else {
                // Not waiting yet (the timer or the cancellation beat the continuation): leave word.
                if id == state.nextId { state.endedEarly = (id, outcome) }
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.continuation.resume(returning: outcome)
    }
}
