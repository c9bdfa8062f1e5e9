import Foundation
import NIOConcurrencyHelpers

/// When each app key and bearer token was last used, kept in memory and written with the
/// last-seen batches (`LastSeenWriter`): a request writes nothing for it. Lists show the newer of
/// the stored time and the one noted here. A crash loses the times of the last few seconds.
public final class CredentialUseLog: Sendable {
    struct Uses {
        var keys: [String: Date] = [:]
        var tokens: [String: Date] = [:]
    }

    private let noted = NIOLockedValueBox(Uses())

    public init() {}

    func usedKey(_ keyId: String, at time: Date) {
        noted.withLockedValue { uses in
            if let earlier = uses.keys[keyId], earlier >= time { return }
            uses.keys[keyId] = time
        }
    }

    func usedToken(_ tokenId: String, at time: Date) {
        noted.withLockedValue { uses in
            if let earlier = uses.tokens[tokenId], earlier >= time { return }
            uses.tokens[tokenId] = time
        }
    }

    /// App keys or tokens as `read` returns them, each with the newer of its stored and noted
    /// last use. What was noted is taken before the read: a batch written (and so forgotten here)
    /// between the two is then in what the read returns. Taken after, such a time would be in neither.
    func latest<Record: UsedCredential>(_ read: () async throws -> [Record]) async rethrows -> [Record] {
        let noted = noted.withLockedValue { $0[keyPath: Record.notedUses] }
        return try await read().map { record in
            var record = record
            record.lastUsedAt = Self.newer(record.lastUsedAt, noted[record.usageId])
            return record
        }
    }

    /// Writes what was noted; on failure the times go back for the next batch (unless newer ones
    /// came meanwhile). A time stays noted until the store has it.
    public func flush(to store: any ApplicationStore) async throws {
        let batch = noted.withLockedValue { $0 }
        guard !batch.keys.isEmpty || !batch.tokens.isEmpty else { return }
        try await store.recordCredentialUse(keys: batch.keys, tokens: batch.tokens)
        noted.withLockedValue { uses in
            // Only what was written goes; a newer time noted meanwhile stays for the next batch.
            uses.keys = uses.keys.filter { batch.keys[$0.key] != $0.value }
            uses.tokens = uses.tokens.filter { batch.tokens[$0.key] != $0.value }
        }
    }

    private static func newer(_ a: Date?, _ b: Date?) -> Date? {
        guard let a else { return b }
        guard let b else { return a }
        return max(a, b)
    }
}

/// A record with a last use: app keys and tokens.
protocol UsedCredential {
    var lastUsedAt: Date? { get set }
    /// Its id in the uses noted.
    var usageId: String { get }
    /// Where its kind's uses are noted.
    static var notedUses: KeyPath<CredentialUseLog.Uses, [String: Date]> { get }
}

extension AppKeyRecord: UsedCredential {
    var usageId: String { keyId }
    static var notedUses: KeyPath<CredentialUseLog.Uses, [String: Date]> { \.keys }
}

extension TokenRecord: UsedCredential {
    var usageId: String { id }
    static var notedUses: KeyPath<CredentialUseLog.Uses, [String: Date]> { \.tokens }
}
