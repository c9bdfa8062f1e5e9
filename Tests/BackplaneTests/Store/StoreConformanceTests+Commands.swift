@testable import Backplane
import Foundation
import BackplaneWire
import Testing

/// The command queue as the store keeps it, on every store kind: delivery order, one finish
/// under concurrent acks, cancel against delivery, and a kill that detaches the device.
extension StoreConformanceTests {
    /// Open commands are delivered in the order they were enqueued, and a command finishes once:
    /// of many syncs acknowledging it at the same time, one is accepted and the rest are
    /// duplicates, and a later ack changes nothing.
    @Test(arguments: StoreKind.allCases)
    func aCommandIsDeliveredInOrderAndFinishesOnce(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        try await registered(store, applicationId, "phone")
        let services = BackplaneServices(store: store, now: { Self.now })
        let (commands, sync) = (services.commands, services.sync)
        var enqueued: [String] = []
        for type in [CommandType.syncNow, .wipe, .syncNow] {
            enqueued += try await commands.enqueue(applicationId: applicationId, EnqueueCommandRequest(type: type, deviceId: "phone"))
                .commands.map(\.commandId)
        }
        let delivered = try await sync.sync(applicationId: applicationId, deviceId: "phone", SyncRequest(acks: [])).commands
        #expect(delivered.map(\.commandId) == enqueued)
        #expect(delivered.allSatisfy { $0.state == .delivered })

        let first = enqueued[0]
        let results = try await withThrowingTaskGroup(of: [CommandAckResult].self) { group in
            for _ in 0..<12 {
                group.addTask {
                    try await sync.sync(applicationId: applicationId, deviceId: "phone", SyncRequest(acks: [CommandAck(commandId: first, outcome: .succeeded)])).ackResults
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(results.count(where: { $0.status == .accepted }) == 1)
        #expect(results.count(where: { $0.status == .duplicate }) == 11)
        let late = try await sync.sync(applicationId: applicationId, deviceId: "phone", SyncRequest(acks: [CommandAck(commandId: first, outcome: .failed, reason: "late")]))
        #expect(late.ackResults.map(\.status) == [.duplicate])
        #expect(late.commands.map(\.commandId) == Array(enqueued.dropFirst()))
        let finished = try #require(try await store.command(applicationId: applicationId, commandId: first))
        #expect(finished.state == .succeeded)
        #expect(finished.failureReason == nil)
    }

    /// Cancelling and delivering race on the same row: each command ends either cancelled (and no
    /// sync ever handed it out) or delivered (and the cancel was refused), never both.
    @Test(arguments: StoreKind.allCases)
    func cancelAndDeliveryNeverBothWin(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        try await registered(store, applicationId, "phone")
        let services = BackplaneServices(store: store, now: { Self.now })
        let (commands, sync) = (services.commands, services.sync)
        var ids: [String] = []
        for _ in 0..<16 {
            ids += try await commands.enqueue(applicationId: applicationId, EnqueueCommandRequest(type: .syncNow, deviceId: "phone"))
                .commands.map(\.commandId)
        }
        enum Outcome: Sendable { case cancelled(String), refused(String), handedOut([String]) }
        let outcomes = try await withThrowingTaskGroup(of: Outcome.self) { group in
            for (index, id) in ids.enumerated() {
                group.addTask {
                    do {
                        _ = try await commands.cancel(applicationId: applicationId, commandId: id)
                        return .cancelled(id)
                    } catch let error as ServiceError where error.code == .conflict {
                        return .refused(id)
                    }
                }
                if index % 4 == 0 {
                    group.addTask { .handedOut(try await sync.sync(applicationId: applicationId, deviceId: "phone", SyncRequest(acks: [])).commands.map(\.commandId)) }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        var cancelled = Set<String>(), refused = Set<String>(), handedOut = Set<String>()
        for outcome in outcomes {
            switch outcome {
            case .cancelled(let id): cancelled.insert(id)
            case .refused(let id): refused.insert(id)
            case .handedOut(let page): handedOut.formUnion(page)
            }
        }
        #expect(cancelled.union(refused) == Set(ids))
        #expect(cancelled.isDisjoint(with: handedOut), "a cancelled command was handed to the device")
        #expect(refused.isSubset(of: handedOut), "a cancel was refused for a command no sync delivered")
        for id in ids {
            let state = try #require(try await store.command(applicationId: applicationId, commandId: id)).state
            #expect(state == (cancelled.contains(id) ? .cancelled : .delivered))
        }
    }

    /// A succeeded kill takes the device out in the transaction that records the ack.
    @Test(arguments: StoreKind.allCases)
    func aSucceededKillDetachesTheDevice(_ kind: StoreKind) async throws {
        let store = try await kind.make()
        let applicationId = try await application(in: store)
        try await registered(store, applicationId, "phone")
        let services = BackplaneServices(store: store, now: { Self.now })
        let (commands, sync) = (services.commands, services.sync)
        let kill = try await commands.enqueue(applicationId: applicationId, EnqueueCommandRequest(type: .kill, deviceId: "phone"))
            .commands[0].commandId
        _ = try await sync.sync(applicationId: applicationId, deviceId: "phone", SyncRequest(acks: []))
        let deferred = try await sync.sync(applicationId: applicationId, deviceId: "phone", SyncRequest(acks: [CommandAck(commandId: kill, outcome: .deferred, reason: "playing")]))
        #expect(deferred.commands.map(\.commandId) == [kill], "a deferred command stays open")
        #expect(try await store.device(applicationId: applicationId, deviceId: "phone")?.isRegistered == true)
        _ = try await sync.sync(applicationId: applicationId, deviceId: "phone", SyncRequest(acks: [CommandAck(commandId: kill, outcome: .succeeded)]))
        let device = try #require(try await store.device(applicationId: applicationId, deviceId: "phone"))
        #expect(!device.isRegistered)
        #expect(!device.downloadEnabled)
        #expect(try await store.command(applicationId: applicationId, commandId: kill)?.deferrals == 1)
    }
}
