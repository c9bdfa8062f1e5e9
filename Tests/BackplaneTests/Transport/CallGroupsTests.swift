@testable import Backplane
import Foundation
import Synchronization
import Testing

/// `CallGroups`, the group commit under PostgreSQL's sign-in reads and nonces: calls made while
/// a group is at the database go together as the next, each answered its own; the database out
/// of reach fails every waiting call at once; past the cap a call is refused, not queued.
@Suite struct CallGroupsTests {
    /// A group run whose first group waits until `release()`; every group is recorded.
    final class HeldRun: Sendable {
        let groups = Mutex<[[Int]]>([])
        private let gate: AsyncStream<Void>
        private let opener: AsyncStream<Void>.Continuation
        let failFirst: Bool

        init(failFirst: Bool = false) {
            (gate, opener) = AsyncStream.makeStream()
            self.failFirst = failFirst
        }

        func release() { opener.yield() }

        func run(_ inputs: [Int]) async throws -> [Int] {
            let first = groups.withLock { groups in
                groups.append(inputs)
                return groups.count == 1
            }
            if first {
                for await _ in gate { break }
                if failFirst { throw StoreUnavailableError("the database is down") }
            }
            return inputs.map { $0 * 2 }
        }
    }

    /// Waits (bounded) until `condition` holds.
    func eventually(_ what: String, _ condition: () -> Bool) async throws {
        for _ in 0..<1_000 where !condition() { try await Task.sleep(for: .milliseconds(5)) }
        try #require(condition(), "\(what) within 5 s")
    }

    @Test func callsMadeWhileAGroupRunsGoTogetherAndEachGetsItsOwnAnswer() async throws {
        let groups = CallGroups<Int, Int>()
        let held = HeldRun()
        let first = Task { try await groups.call(0, run: held.run) }
        try await eventually("the first group started") { held.groups.withLock { $0.count } == 1 }
        let later = (1...10).map { n in Task { (n, try await groups.call(n, run: held.run)) } }
        try await eventually("ten calls waiting") { groups.waitingCount == 10 }
        held.release()
        #expect(try await first.value == 0)
        for call in later {
            let (n, answer) = try await call.value
            #expect(answer == n * 2)
        }
        let ran = held.groups.withLock { $0 }
        #expect(ran.count == 2)
        #expect(ran.last.map { Set($0) } == Set(1...10), "the ten that waited went as one group")
    }

    @Test func theDatabaseOutOfReachFailsEveryWaitingCallAtOnce() async throws {
        let groups = CallGroups<Int, Int>()
        let held = HeldRun(failFirst: true)
        let first = Task { try await groups.call(0, run: held.run) }
        try await eventually("the first group started") { held.groups.withLock { $0.count } == 1 }
        let later = (1...10).map { n in Task { try await groups.call(n, run: held.run) } }
        try await eventually("ten calls waiting") { groups.waitingCount == 10 }
        held.release()
        await #expect(throws: StoreUnavailableError.self) { try await first.value }
        for call in later { await #expect(throws: StoreUnavailableError.self) { try await call.value } }
        #expect(held.groups.withLock { $0.count } == 1, "the waiting calls were not sent to a database out of reach")
        #expect(groups.waitingCount == 0)
        // The next call starts a group of its own again.
        #expect(try await groups.call(21, run: held.run) == 42)
    }

    @Test func pastTheCapACallIsRefusedNotQueued() async throws {
        let groups = CallGroups<Int, Int>(mostWaiting: 5)
        let held = HeldRun()
        let first = Task { try await groups.call(0, run: held.run) }
        try await eventually("the first group started") { held.groups.withLock { $0.count } == 1 }
        let queued = (1...5).map { n in Task { try await groups.call(n, run: held.run) } }
        try await eventually("five calls waiting") { groups.waitingCount == 5 }
        await #expect(throws: StoreUnavailableError.self) { try await groups.call(6, run: held.run) }
        held.release()
        #expect(try await first.value == 0)
        for (n, call) in zip(1...5, queued) { #expect(try await call.value == n * 2) }
    }
}
