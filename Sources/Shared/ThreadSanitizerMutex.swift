#if BACKPLANE_TSAN
import Foundation

/// `Synchronization.Mutex` as ThreadSanitizer can see it, for `scripts/sanitize thread` only (it
/// builds with `-DBACKPLANE_TSAN`; no other build has this type).
///
/// On Linux the standard library's `Mutex` locks with an atomic compare-and-swap and a raw
/// `futex` system call, neither of which ThreadSanitizer models, so every access under one looks
/// like a data race to it: in a 15-line program, four threads adding to a counter under a
/// `Mutex` are reported, and under `NSLock` (a pthread mutex, which it intercepts) they are
/// not. Each module that uses `Mutex` declares, under the same condition,
/// `typealias Mutex<Value> = ThreadSanitizerMutex<Value>`, which shadows the standard one in
/// that module; the code at every use site is unchanged. Same contract: `withLock` runs its body
/// with the value, holding the lock.
public struct ThreadSanitizerMutex<Value>: ~Copyable, @unchecked Sendable {
    private final class Storage {
        let lock = NSLock()
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    private let storage: Storage

    public init(_ initialValue: consuming sending Value) {
        storage = Storage(initialValue)
    }

    public borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        storage.lock.lock()
        defer { storage.lock.unlock() }
        return try body(&storage.value)
    }
}
#endif
