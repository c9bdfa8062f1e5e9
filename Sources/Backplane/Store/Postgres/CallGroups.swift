import NIOConcurrencyHelpers

/// Group commit for a statement every signed request makes: a call made while an earlier group is
/// at the database waits, and every call that waited goes in the next group, as one statement
/// on one leased connection. A call never waits for a timer: when nothing is at the database its
/// group starts at once, so a lone request pays one statement as before, and under load the
/// groups grow with the wait.
///
/// Why: on a quiet sync, PostgreSQL's work per statement (a round trip, a bind, an executor
/// start, a commit) and the pool's lease cost more than what the statement reads or writes; a
/// group of 32 pays them once.
///
/// A group starts only after each of its calls was made, so a call reads what was committed
/// before it, as a statement of its own would. A group that fails fails each of its calls with
/// the same error; when the error is that the database is out of reach
/// (`StoreUnavailableError`: no connection within the lease timeout, a lost connection), every
/// call waiting by then fails with it too, so while the database is down no call waits longer
/// than one group's lease. And at most `mostWaiting` calls wait: one more is answered
/// `StoreUnavailableError` (503) at once rather than queued behind a database that cannot keep up.
final class CallGroups<Input: Sendable, Output: Sendable>: Sendable {
    private typealias Call = (input: Input, answer: CheckedContinuation<Output, any Error>)
    private struct Waiting {
        var calls: [Call] = []
        var atTheDatabase = false
    }
    private enum Queued { case starts, waits, refused }

    private let waiting = NIOLockedValueBox(Waiting())
    /// The most calls in one group: bounds a statement's parameters and a group's latency.
    let largestGroup: Int
    /// The most calls waiting for a group (a node holds 4,096 connections by default).
    let mostWaiting: Int

    init(largestGroup: Int = 256, mostWaiting: Int = 4_096) {
        precondition(largestGroup > 0 && mostWaiting > 0)
        self.largestGroup = largestGroup
        self.mostWaiting = mostWaiting
    }

    /// Calls waiting for the next group (not those of the group at the database).
    var waitingCount: Int { waiting.withLockedValue { $0.calls.count } }

    /// The answer to `input`, from a group run by `run`, which answers each input of its group, in
    /// order. Every caller of one `CallGroups` passes the same `run`: whichever call starts the
    /// groups runs them, until none are waiting.
    func call(_ input: Input, run: @escaping @Sendable ([Input]) async throws -> [Output]) async throws -> Output {
        try await withCheckedThrowingContinuation { answer in
            let queued = waiting.withLockedValue { waiting -> Queued in
                guard waiting.calls.count < mostWaiting else { return .refused }
                waiting.calls.append((input, answer))
                guard !waiting.atTheDatabase else { return .waits }
                waiting.atTheDatabase = true
                return .starts
            }
            switch queued {
            case .starts: Task { await self.runGroups(run) }
            case .waits: break
            case .refused: answer.resume(throwing: StoreUnavailableError("\(mostWaiting) calls already wait for the database"))
            }
        }
    }

    private func runGroups(_ run: @Sendable ([Input]) async throws -> [Output]) async {
        while true {
            let group = waiting.withLockedValue { waiting in
                let group = waiting.calls.prefix(largestGroup)
                waiting.calls.removeFirst(group.count)
                if group.isEmpty { waiting.atTheDatabase = false }
                return Array(group)
            }
            guard !group.isEmpty else { return }
            do {
                let outputs = try await run(group.map(\.input))
                guard outputs.count == group.count else { throw CallGroupMismatch(inputs: group.count, outputs: outputs.count) }
                for (call, output) in zip(group, outputs) { call.answer.resume(returning: output) }
            } catch {
                // Out of reach: so is it for the calls waiting behind this group.
                let alsoFailing: [Call] = error is StoreUnavailableError ? waiting.withLockedValue { waiting in
                    defer { waiting.calls.removeAll() }
                    return waiting.calls
                } : []
                for call in group + alsoFailing { call.answer.resume(throwing: error) }
            }
        }
    }
}

/// A group's statement answered a different number of calls than it was given: a bug, answered
/// as an error rather than a crash or a call left waiting.
struct CallGroupMismatch: Error, CustomStringConvertible {
    var inputs: Int
    var outputs: Int
    var description: String { "a grouped statement answered \(outputs) of \(inputs) calls" }
}
