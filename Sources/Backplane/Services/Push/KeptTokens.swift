import Foundation
import Synchronization

/// The tokens a sender makes per application and keeps (an APNs provider token, an FCM access
/// token). Callers that need one at once share one making: a burst of pushes signs one provider
/// token (Apple answers 429 `TooManyProviderTokenUpdates` to many) and asks Google for one access
/// token. A token a provider refused is replaced once, however many pushes saw it refused.
final class KeptTokens: Sendable {
    struct Token: Sendable {
        var value: String
        /// Which making it came from: what a caller names when the token was refused.
        var id: UInt64
        fileprivate var setAt: Date
        fileprivate var madeAt: Date
        fileprivate var validUntil: Date
    }

    /// What a making that did not make a token ended with (its waiters all get it).
    struct Failure: Error {
        var result: PushResult
    }

    private struct State {
        var kept: [String: Token] = [:]
        var making: [String: (setAt: Date, id: UInt64, task: Task<Token, any Error>)] = [:]
        var lastId: UInt64 = 0
    }

    private let state = Mutex(State())

    /// The application's token for the credentials set at `setAt`: the kept one while `now` is
    /// within its life and it is not `refused`, else one being made, else a new making by `make`
    /// (which answers the token and until when it may be used).
    func token(
        for applicationId: String, setAt: Date, now: Date, refused: UInt64? = nil,
        make: @escaping @Sendable () async throws -> (value: String, validUntil: Date)
    ) async throws -> Token {
        enum Next { case kept(Token), wait(Task<Token, any Error>, UInt64) }
        let next: Next = state.withLock { state in
            if let kept = state.kept[applicationId], kept.setAt == setAt, kept.id != refused, now >= kept.madeAt, now < kept.validUntil {
                return .kept(kept)
            }
            if let making = state.making[applicationId], making.setAt == setAt, making.id != refused {
                return .wait(making.task, making.id)
            }
            state.lastId += 1
            let id = state.lastId
            let task = Task<Token, any Error> {
                let made = try await make()
                return Token(value: made.value, id: id, setAt: setAt, madeAt: now, validUntil: made.validUntil)
            }
            state.making[applicationId] = (setAt, id, task)
            return .wait(task, id)
        }
        switch next {
        case .kept(let token):
            return token
        case .wait(let task, let id):
            let result = await task.result
            state.withLock { state in
                guard state.making[applicationId]?.id == id else { return }
                state.making[applicationId] = nil
                if case .success(let token) = result { state.kept[applicationId] = token }
            }
            return try result.get()
        }
    }
}
