/// Runs `work` under one deadline for all of it: nil when the deadline passes first, and `work`
/// is then cancelled. For a fetch from a host the backplane does not control, where the client's
/// own timeouts bound each step but not a body that trickles in.
func withinDeadline<T: Sendable>(_ deadline: Duration, _ work: @escaping @Sendable () async throws -> T) async throws -> T? {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await work() }
        group.addTask {
            try await Task.sleep(for: deadline)
            return nil
        }
        defer { group.cancelAll() }
        return try await group.next() ?? nil
    }
}
