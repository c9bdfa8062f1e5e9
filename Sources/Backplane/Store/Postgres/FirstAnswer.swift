import NIOConcurrencyHelpers

/// An answer given once, by whichever comes first: the work, or a timer that gives up on it.
///
/// Unlike a task group's, whoever awaits `value` does not wait for the work's task to end too.
/// That matters for the database: a statement written to a connection in the instant PostgreSQL
/// closes it is never answered by postgres-nio (its channel write carries no promise), so the
/// task running it can stay suspended for ever. The request must still be answered, and the node
/// must still be able to shut down.
final class FirstAnswer<T: Sendable>: Sendable {
    private enum State {
        case pending(CheckedContinuation<T, any Error>?)
        case given(Result<T, any Error>)
        case taken
    }

    private let state = NIOLockedValueBox(State.pending(nil))

    /// Gives the answer, unless one was given before; true if this one counts.
    @discardableResult
    func give(_ result: Result<T, any Error>) -> Bool {
        let (counts, waiting): (Bool, CheckedContinuation<T, any Error>?) = state.withLockedValue { state in
            guard case .pending(let continuation) = state else { return (false, nil) }
            state = continuation == nil ? .given(result) : .taken
            return (true, continuation)
        }
        waiting?.resume(with: result)
        return counts
    }

    /// The first answer given; may be awaited once.
    var value: T {
        get async throws {
            try await withCheckedThrowingContinuation { continuation in
                let given: Result<T, any Error>? = state.withLockedValue { state in
                    switch state {
                    case .pending:
                        state = .pending(continuation)
                        return nil
                    case .given(let result):
                        state = .taken
                        return result
                    case .taken:
                        preconditionFailure("FirstAnswer.value awaited twice")
                    }
                }
                if let given { continuation.resume(with: given) }
            }
        }
    }
}
