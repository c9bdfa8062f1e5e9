import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Marks a data directory as served: `serve` holds it for its whole run, `restore` while it
/// replaces the database. An advisory lock (`flock`) on `backplane.lock` in the directory,
/// released by the kernel when the process ends, however it ends.
public final class DataDirectoryLock: Sendable {
    /// -1 once released.
    private let descriptor: Mutex<Int32>

    /// Creates the directory (owner-only) if needed and takes the lock, or throws at once when
    /// another process holds it.
    public init(directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let path = directory.appendingPathComponent("backplane.lock").path
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw BackupError("Cannot open \(path) (errno \(errno)).") }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno
            guard reason == EWOULDBLOCK else {
                close(descriptor)
                throw BackupError("Cannot lock \(path) (errno \(reason)); a file system without locks (NFS, CIFS) cannot hold the data.")
            }
            let holder = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
            close(descriptor)
            throw BackupError(
                "The data directory \(directory.path) is in use by a running backplane\(holder.map { " (pid \($0))" } ?? ""). Stop it first.")
        }
        // Who holds it, for the message above; the lock itself is what counts.
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pid.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        self.descriptor = Mutex(descriptor)
    }

    deinit { release() }

    public func release() {
        descriptor.withLock { descriptor in
            if descriptor >= 0 { close(descriptor) }
            descriptor = -1
        }
    }
}
