@testable import Backplane
import Foundation
import GRDB
import Testing
import TestSupport

/// The SQLite store spends nonces in memory under a durable lease (`SpentNonces`): which nonces
/// reach the disk, what a restart refuses, and that nothing is forgotten early.
struct NonceLeaseTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    private func record(_ nonce: String, signedAt: Date = now, receivedAt: Date = now) -> SignedRequestRecord {
        SignedRequestRecord(keyId: "ak_1", nonce: "nonce-\(nonce)-0123456789", signedAt: signedAt, receivedAt: receivedAt)
    }

    /// Nonces and lease as on disk, read through a connection of their own.
    private func onDisk(_ directory: URL) throws -> (nonces: Int, lease: Int64?) {
        try DatabaseQueue(path: directory.appendingPathComponent("backplane.sqlite").path).read { db in
            (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM nonces") ?? -1,
             try Int64.fetchOne(db, sql: "SELECT accepts_before FROM nonce_lease"))
        }
    }

    @Test func onlyANonceSignedPastTheLeaseReachesTheDisk() async throws {
        let directory = temporaryDirectory("backplane-nonce-lease")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(directory: directory)
        let now = Self.now

        // No lease yet: the first nonce is written, and moves the lease two seconds past its arrival.
        #expect(try await store.recordSignedRequest(record("first")))
        #expect(try onDisk(directory) == (1, SpentNonces.seconds(now) + 2))
        // Before the lease: spent in memory, nothing written; a replay is refused from memory.
        for index in 0..<100 { #expect(try await store.recordSignedRequest(record("\(index)", signedAt: now.addingTimeInterval(1)))) }
        #expect(try await store.recordSignedRequest(record("5", signedAt: now.addingTimeInterval(1))) == false)
        #expect(try await store.recordSignedRequest(record("first")) == false)
        #expect(try onDisk(directory) == (1, SpentNonces.seconds(now) + 2))
        #expect(try await store.nonceCount() == 101)
        // Signed ahead of the lease (a device clock running fast): written, lease unchanged.
        #expect(try await store.recordSignedRequest(record("ahead", signedAt: now.addingTimeInterval(60))))
        #expect(try onDisk(directory) == (2, SpentNonces.seconds(now) + 2))
        // Time reaches the lease: the first nonce signed there renews it, the next is in memory.
        let later = now.addingTimeInterval(2)
        #expect(try await store.recordSignedRequest(record("renews", signedAt: later, receivedAt: later)))
        #expect(try await store.recordSignedRequest(record("after", signedAt: later, receivedAt: later)))
        #expect(try onDisk(directory) == (3, SpentNonces.seconds(later) + 2))
    }

    /// After a restart the memory is gone: a timestamp before the last lease is refused (it
    /// could be a replay of a nonce spent in memory), naming the first one accepted; a nonce
    /// written before the restart is still refused as reused; a new one at that first timestamp is accepted.
    @Test func aRestartRefusesWhatItCannotVouchFor() async throws {
        let directory = temporaryDirectory("backplane-nonce-lease")
        defer { try? FileManager.default.removeItem(at: directory) }
        let now = Self.now
        do {
            let store = try SQLiteStore(directory: directory)
            #expect(try await store.recordSignedRequest(record("written")))
            #expect(try await store.recordSignedRequest(record("in-memory", signedAt: now.addingTimeInterval(1))))
            #expect(try await store.recordSignedRequest(record("ahead", signedAt: now.addingTimeInterval(60))))
        }
        let restarted = try SQLiteStore(directory: directory)
        let receivedAt = now.addingTimeInterval(1.5)
        for replayed in ["written", "in-memory"] {
            let signedAt = replayed == "written" ? now : now.addingTimeInterval(1)
            do {
                _ = try await restarted.recordSignedRequest(record(replayed, signedAt: signedAt, receivedAt: receivedAt))
                Issue.record("the replay of '\(replayed)' was accepted")
            } catch let refused as SignedBeforeRestartError {
                #expect(refused.notBefore == SpentNonces.seconds(now) + 2)
                #expect(refused.serverTime == receivedAt)
            }
        }
        #expect(try await restarted.recordSignedRequest(record("ahead", signedAt: now.addingTimeInterval(60), receivedAt: receivedAt)) == false)
        #expect(try await restarted.recordSignedRequest(record("new", signedAt: now.addingTimeInterval(2), receivedAt: receivedAt)))
    }

    /// A request whose write fails changed nothing: its nonce is given back, and the same
    /// request may come again, whether the nonce was to be written or spent in memory; a failed
    /// write moves no lease.
    @Test func aFailedWriteGivesItsNonceBack() async throws {
        struct Refused: Error {}
        let directory = temporaryDirectory("backplane-nonce-lease")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(directory: directory)
        for name in ["written", "in-memory"] {
            let nonce = record(name)
            await #expect(throws: Refused.self) { _ = try await store.write(spending: nonce) { _ in throw Refused() } }
            if name == "written" { #expect(try onDisk(directory) == (0, nil)) }
            #expect(try await store.recordSignedRequest(nonce))
            #expect(try await store.recordSignedRequest(nonce) == false)
        }
    }

    /// Of one nonce spent many times at once in memory alone, once is accepted.
    @Test func aNonceSpentInMemoryIsAcceptedOnceUnderConcurrency() async throws {
        let store = try SQLiteStore.inMemory()
        #expect(try await store.recordSignedRequest(record("moves-the-lease")))
        let nonce = record("in-memory", signedAt: Self.now.addingTimeInterval(1))
        let accepted = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<50 { group.addTask { try await store.recordSignedRequest(nonce) } }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(accepted == 1)
    }

    /// A nonce found on disk when it was to be written stays spent: were it given back, its
    /// replay would be spent in memory alone once the lease passed its timestamp.
    @Test func aNonceFoundOnDiskStaysSpent() async throws {
        let directory = temporaryDirectory("backplane-nonce-lease")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(directory: directory)
        let nonce = record("on-disk")
        // On disk but not in memory, as no code path leaves it: written by another connection.
        try await DatabaseQueue(path: directory.appendingPathComponent("backplane.sqlite").path).write { db in
            try db.execute(sql: "INSERT INTO nonces (key_id, nonce, expires_at) VALUES (?, ?, ?)", arguments: [nonce.keyId, nonce.nonce, nonce.expiresAt])
        }
        #expect(try await store.recordSignedRequest(nonce) == false)
        // The lease moves past its timestamp; the replay would now be spent in memory alone.
        #expect(try await store.recordSignedRequest(record("moves-the-lease")))
        #expect(try await store.recordSignedRequest(nonce) == false)
    }

    /// Pruning removes only nonces whose timestamp can no longer pass the freshness check, even
    /// when one spent later expires sooner than one spent before it.
    @Test func pruningForgetsNoNonceEarly() throws {
        let nonces = SpentNonces(lease: 0, durable: [])
        let ahead = record("ahead", signedAt: Self.now.addingTimeInterval(100)), plain = record("plain")
        _ = try nonces.spend(ahead)
        _ = try nonces.spend(plain)
        #expect(nonces.prune(expiredBefore: plain.expiresAt) == 0)
        // `plain` has expired but waits behind `ahead`: kept longer, never shorter.
        #expect(nonces.prune(expiredBefore: plain.expiresAt.addingTimeInterval(1)) == 0)
        #expect(throws: NonceReusedError.self) { try nonces.spend(plain) }
        #expect(nonces.prune(expiredBefore: ahead.expiresAt) == 0)
        #expect(nonces.prune(expiredBefore: ahead.expiresAt.addingTimeInterval(1)) == 2)
        #expect(nonces.count == 0)
        #expect(try nonces.spend(plain) == .durable(lease: SpentNonces.seconds(Self.now) + 2))
    }
}
