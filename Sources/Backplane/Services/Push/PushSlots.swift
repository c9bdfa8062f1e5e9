import Synchronization

/// A bound on the pushes one node works on at once (reading the device, claiming, sending): a
/// fan-out to ten thousand devices queues here instead of queueing ten thousand store writes
/// ahead of the API's, or ten thousand requests ahead of the provider's streams. First come,
/// first served; a waiter that is cancelled (the server stopping) leaves without a slot.
final class PushSlots: Sendable {
    private struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var free: Int
        var waiting: [Waiter] = []
        /// The first of `waiting` not yet served: removing from the front of an array is a copy.
        var head = 0
        var lastId: UInt64 = 0
        /// Waiters cancelled before they could wait.
        var cancelled: Set<UInt64> = []
    }

    private let state: Mutex<State>

    init(_ count: Int) {
        state = Mutex(State(free: max(1, count)))
    }

    /// True once the caller holds a slot (give it back with `release()`); false when cancelled.
    func acquire() async -> Bool {
        let id = state.withLock { $0.lastId += 1; return $0.lastId }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let now: Bool? = state.withLock { state in
                    if state.cancelled.remove(id) != nil { return false }
                    if state.free > 0 {
                        state.free -= 1
                        return true
                    }
                    state.waiting.append(Waiter(id: id, continuation: continuation))
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiter: Waiter? = state.withLock { state in
                if let index = state.waiting[state.head...].firstIndex(where: { $0.id == id }) {
                    return state.waiting.remove(at: index)
                }
                state.cancelled.insert(id)
                return nil
            }
            waiter?.continuation.resume(returning: false)
        }
    }

    func release() {
        let next: Waiter? = state.withLock { state in
            guard state.head < state.waiting.count else {
                state.free += 1
                return nil
            }
            let next = state.waiting[state.head]
            state.head += 1
            if state.head > 1024, state.head * 2 > state.waiting.count {
                state.waiting.removeFirst(state.head)
                state.head = 0
            }
            return next
        }
        next?.continuation.resume(returning: true)
    }
}
