@testable import ClientSDK
import Foundation
import Testing

/// The primitive both background loops sleep on (sync loop, event uploader).
@Suite struct WakeSignalTests {
    @Test func aSignalSentWhileNobodyWaitsWakesTheNextWait() async {
        let wake = WakeSignal()
        wake.signal()
        #expect(await wake.wait(upTo: .seconds(30)) == .signalled)
        // Kept once, not forever.
        #expect(await wake.wait(upTo: .milliseconds(20)) == .timedOut)
    }

    @Test func aSignalEndsAWaitInProgress() async {
        let wake = WakeSignal()
        let waiting = Task { await wake.wait(upTo: nil) }
        try? await Task.sleep(for: .milliseconds(30))
        wake.signal()
        #expect(await waiting.value == .signalled)
    }

    /// The uploader's old timer, cancelled when its wait ended early, still woke the next wait:
    /// a cancelled sleep returns at once. Here an earlier wait's timer never ends a later wait.
    @Test func anEarlierWaitsTimerDoesNotEndALaterWait() async {
        let wake = WakeSignal()
        let first = Task { await wake.wait(upTo: .milliseconds(40)) }
        try? await Task.sleep(for: .milliseconds(5))
        wake.signal()
        #expect(await first.value == .signalled)
        let ended = LockedBox<WakeSignal.Outcome?>(nil)
        let second = Task {
            let outcome = await wake.wait(upTo: nil)
            ended.withLock { $0 = outcome }
            return outcome
        }
        try? await Task.sleep(for: .milliseconds(150))
        #expect(ended.withLock { $0 } == nil, "the first wait's timer ended the second wait")
        wake.signal()
        #expect(await second.value == .signalled)
    }

    @Test func cancellingTheWaitingTaskEndsTheWait() async {
        let wake = WakeSignal()
        let waiting = Task { await wake.wait(upTo: nil) }
        try? await Task.sleep(for: .milliseconds(20))
        waiting.cancel()
        #expect(await waiting.value == .cancelled)

        let cancelledFirst = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await wake.wait(upTo: nil)
        }
        #expect(await cancelledFirst.value == .cancelled)
    }

    /// Many short waits, each racing its own timer against a signal: every wait ends, once.
    @Test func shortTimersRacingSignalsNeverLoseAWait() async {
        let wake = WakeSignal()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for _ in 0..<300 { _ = await wake.wait(upTo: .microseconds(50)) }
            }
            group.addTask {
                for _ in 0..<300 {
                    wake.signal()
                    await Task.yield()
                }
            }
        }
    }
}
