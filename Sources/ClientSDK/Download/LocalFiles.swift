import Foundation
import NIOCore
import NIOPosix

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif

/// The file system calls of the per-file download path, made directly. Most of them look for
/// files that are not there yet, which `FileManager` answers by building an error (and, for a
/// size, an attribute dictionary); `FileHandle.synchronize()` is a plain `fsync`, which on Apple
/// platforms neither orders writes nor leaves the drive's cache. Each call reads `errno` at once, inside the
/// path's C string scope, before anything else can change it.
enum LocalFiles {
    /// The size of what is at `url`; nil when nothing is.
    static func size(of url: URL) -> Int64? {
        url.withUnsafeFileSystemRepresentation { path in
            var status = stat()
            guard let path, stat(path, &status) == 0 else { return nil }
            return Int64(status.st_size)
        }
    }

    /// Bytes an unprivileged process may still write on the volume holding `url` (what
    /// `FileManager`'s `systemFreeSize` says, without its attribute dictionary: the engine asks
    /// before every file).
    static func freeBytes(on url: URL) -> Int64? {
        url.withUnsafeFileSystemRepresentation { path in
            var volume = statvfs()
            guard let path, statvfs(path, &volume) == 0 else { return nil }
            let (bytes, overflow) = Int64(clamping: volume.f_bavail).multipliedReportingOverflow(by: Int64(clamping: volume.f_frsize))
            return overflow ? Int64.max : bytes
        }
    }

    /// The size of the volume holding `url`, used or not.
    static func volumeBytes(on url: URL) -> Int64? {
        url.withUnsafeFileSystemRepresentation { path in
            var volume = statvfs()
            guard let path, statvfs(path, &volume) == 0 else { return nil }
            return Int64(clamping: volume.f_blocks).multipliedClamped(by: Int64(clamping: volume.f_frsize))
        }
    }

    /// Opens `url` for writing, creating it (and, when missing, its directory: once per
    /// directory, not per file) and emptying it when `truncating`. (`FileManager.createFile`
    /// writes a temporary file, flushes it and renames it: a second flush per file.)
    static func openForWriting(_ url: URL, truncating: Bool) throws -> FileHandle {
        let flags = O_WRONLY | O_CREAT | O_CLOEXEC | (truncating ? O_TRUNC : 0)
        var outcome = call(url) { open($0, flags, 0o644) }
        if outcome.error == ENOENT {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            outcome = call(url) { open($0, flags, 0o644) }
        }
        return FileHandle(fileDescriptor: try outcome.get(), closeOnDealloc: true)
    }

    static func removeIfPresent(_ url: URL) throws {
        let outcome = call(url) { unlink($0) }
        if outcome.error != ENOENT { _ = try outcome.get() }
    }

    /// `rename(2)`: it replaces an existing destination, where `FileManager.moveItem` looks at both
    /// paths first and refuses one.
    static func rename(_ source: URL, to destination: URL) throws {
        let outcome: Outcome = source.withUnsafeFileSystemRepresentation { from in
            guard let from else { return Outcome(value: -1, error: EINVAL) }
            return call(destination) { Foundation.rename(from, $0) }
        }
        _ = try outcome.get()
    }

    /// Flushes the file's bytes. Not `fully`, far enough that a rename after it cannot reach the
    /// disk before them: `fsync` on Linux (which flushes the drive's cache too), an ordering
    /// barrier (`F_BARRIERFSYNC`) on Apple platforms, where a full flush of the drive's cache per
    /// segment would cost much and one per asset (`fully`, `F_FULLFSYNC`) covers them all.
    static func flush(_ handle: FileHandle, fully: Bool = false) throws {
        let descriptor = handle.fileDescriptor
        #if canImport(Darwin)
        if fcntl(descriptor, fully ? F_FULLFSYNC : F_BARRIERFSYNC) == 0 { return }
        #endif
        guard fsync(descriptor) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    /// Flushes a file by path (fully unless told otherwise). A directory's flush makes the renames and new names in it
    /// durable; a file system that cannot flush a directory (`EINVAL`, `ENOTSUP`, `EBADF`) is
    /// taken at its word, as SQLite does.
    static func flush(path url: URL, isDirectory: Bool = false, fully: Bool = true) throws {
        let descriptor = try call(url) { open($0, O_RDONLY | O_CLOEXEC) }.get()
        do {
            try flush(FileHandle(fileDescriptor: descriptor, closeOnDealloc: true), fully: fully)
        } catch let error as POSIXError where isDirectory && [EINVAL, ENOTSUP, EBADF].contains(error.code.rawValue) {
            return
        }
    }

    /// Flushes an asset's directory and the two above it, `content/` and the data directory:
    /// their entries are the names a new asset directory, and a first `content/`, add. The last
    /// flush is full (on Apple platforms the others are barriers), and takes with it every
    /// barrier-flushed write before it.
    static func flushAssetDirectory(_ directory: URL) throws {
        let content = directory.deletingLastPathComponent()
        try flush(path: directory, isDirectory: true, fully: false)
        try flush(path: content, isDirectory: true, fully: false)
        try flush(path: content.deletingLastPathComponent(), isDirectory: true)
    }

    /// What a call returned, or the `errno` it left.
    struct Outcome {
        var value: Int32
        var error: Int32?

        func get() throws -> Int32 {
            if let error { throw POSIXError(POSIXErrorCode(rawValue: error) ?? .EIO) }
            return value
        }

    }

    private static func call(_ url: URL, _ body: (UnsafePointer<CChar>) -> Int32) -> Outcome {
        url.withUnsafeFileSystemRepresentation { path in
            guard let path else { return Outcome(value: -1, error: EINVAL) }
            let value = body(path)
            return Outcome(value: value, error: value < 0 ? errno : nil)
        }
    }

    /// Runs `body`, which waits for the disk, on NIO's blocking-I/O threads: on the concurrency
    /// pool's few threads it would hold up the other files' network reads while it waits.
    static func waitingForTheDisk(_ body: @escaping @Sendable () throws -> Void) async throws {
        try await NIOThreadPool.singleton.runIfActive(eventLoop: MultiThreadedEventLoopGroup.singleton.any(), body).get()
    }
}
