extension Task {
    /// Waits for the task to end, for at most `limit`; true when it ended in time.
    ///
    /// Not a task group racing a sleep: a group waits for all of its children before it
    /// returns, so a task that does not notice its cancellation (a fetch stuck in a connection
    /// pool) would hold the caller for ever. Here the watcher is left behind instead, and ends
    /// whenever the task does.
    func waitForCompletion(upTo limit: Duration) async -> Bool {
        let ended = WakeSignal()
        Task<Void, Never> {
            _ = await self.result
            ended.signal()
        }
        return await ended.wait(upTo: limit) == .signalled
    }
}
