@testable import Backplane
import Foundation
import Synchronization
import BackplaneWire
import Testing
import TestSupport

/// Concurrent writes share commits, and each keeps the all-or-nothing of its own transaction.
@Suite struct GroupCommitTests {
    /// Half the writes insert a command and then fail on a duplicate id, in the same commits as
    /// the writes that succeed: those are all kept, and nothing of the failed ones is.
    @Test func aFailingWriteInASharedCommitUndoesOnlyItsOwnWork() async throws {
        let directory = temporaryDirectory("backplane-group-commit")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let commits = Atomic<Int>(0)
        let store = try SQLiteStore(path: directory.appendingPathComponent("db.sqlite").path) { statement in
            if statement.hasPrefix("COMMIT") { commits.add(1, ordering: .relaxed) }
        }
        let services = BackplaneServices(store: store)
        let (application, _) = try await services.applications.createApplication(name: "group commit")
        let now = Date()
        func command(_ id: String) -> CommandRecord {
            CommandRecord(
                rowId: nil, commandId: id, applicationId: application.id, deviceId: "phone", type: .wipe, assetIds: nil, state: .pending,
                createdAt: now, updatedAt: now, expiresAt: nil, deliveredAt: nil, completedAt: nil, failureReason: nil, deferrals: 0)
        }
        let writes = 400
        let before = commits.load(ordering: .relaxed)
        let outcomes = await withTaskGroup(of: (Int, Bool).self) { group in
            for index in 0..<writes {
                group.addTask {
                    // Odd writes insert their command, then the same id again: the second insert fails.
                    let batch = index.isMultiple(of: 2) ? [command("good-\(index)")] : [command("bad-\(index)"), command("bad-\(index)")]
                    let succeeded = (try? await store.insertCommands(batch)) != nil
                    return (index, succeeded)
                }
            }
            return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        #expect(outcomes.filter(\.value).keys.sorted() == Array(stride(from: 0, to: writes, by: 2)))
        let stored = try await store.commands(applicationId: application.id, deviceId: "phone").map(\.commandId)
        #expect(Set(stored) == Set(stride(from: 0, to: writes, by: 2).map { "good-\($0)" }))
        // The writes shared commits: far fewer than one each.
        let used = commits.load(ordering: .relaxed) - before
        #expect(used < writes / 2, "\(used) commits for \(writes) writes")
    }
}
